//! What a tool declares about itself, as stable strings: the [`Capability`] it needs, its
//! [`Effect`] and its [`ReplaySafety`], and the [`ParseError`] for a string that is none of
//! them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Error returned when parsing a [`Capability`], [`Effect`] or
/// [`ReplaySafety`] from a string that is not one of its canonical forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} `{value}`; expected one of: {}", .expected.join(", "))]
pub struct ParseError {
    kind: &'static str,
    value: String,
    expected: &'static [&'static str],
}

impl ParseError {
    /// What was being parsed: `"capability"`, `"effect"` or `"replay safety"`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The rejected input.
    pub fn value(&self) -> &str {
        &self.value
    }
}

/// Defines a fieldless enum whose variants each have one stable string form,
/// shared by `as_str`, `Display`, `FromStr` and serde so they cannot drift.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident as $kind:literal {
            $( $(#[$variant_meta:meta])* $variant:ident => $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Serialize, Deserialize)]
        pub enum $name {
            $( $(#[$variant_meta])* #[serde(rename = $text)] $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The stable string form, as used by `Display`, `FromStr` and serde.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = ParseError;

            fn from_str(value: &str) -> Result<Self, ParseError> {
                match value {
                    $($text => Ok(Self::$variant),)+
                    _ => Err(ParseError {
                        kind: $kind,
                        value: value.to_owned(),
                        expected: &[$($text),+],
                    }),
                }
            }
        }
    };
}

string_enum! {
    /// A kind of access a tool needs, declared up front so a host can grant,
    /// deny or audit it before the tool ever runs.
    ///
    /// The canonical order (used by `Ord`, [`Definition::capabilities`](super::Definition::capabilities) and
    /// serialization) is the byte order of the string forms. Variants are
    /// declared in that order so the derived `Ord` agrees with it, and
    /// [`Capability::ALL`] lists them canonically.
    ///
    /// ```
    /// use agent_core::tool::Capability;
    ///
    /// let capability: Capability = "filesystem.read".parse()?;
    /// assert_eq!(capability, Capability::FilesystemRead);
    /// assert_eq!(capability.to_string(), "filesystem.read");
    /// assert!(Capability::EnvironmentRead < Capability::FilesystemRead);
    /// assert!("unknown.thing".parse::<Capability>().is_err());
    /// # Ok::<(), agent_core::tool::ParseError>(())
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum Capability as "capability" {
        /// `environment.read`: read environment variables.
        EnvironmentRead => "environment.read",
        /// `environment.write`: set or unset environment variables.
        EnvironmentWrite => "environment.write",
        /// `filesystem.read`: read files or directory listings.
        FilesystemRead => "filesystem.read",
        /// `filesystem.write`: create, modify or delete files.
        FilesystemWrite => "filesystem.write",
        /// `network.access`: open network connections.
        NetworkAccess => "network.access",
        /// `process.execute`: start other processes.
        ProcessExecute => "process.execute",
        /// `secrets.read`: read credentials or other secrets.
        SecretsRead => "secrets.read",
    }
}

impl Capability {
    /// Whether a [`Effect::ReadOnly`] tool may declare this capability.
    ///
    /// Writes, process execution and network access can change the world (or
    /// send data out of it), which a read-only tool by definition must not.
    pub(super) const fn allowed_for_read_only(self) -> bool {
        matches!(
            self,
            Self::EnvironmentRead | Self::FilesystemRead | Self::SecretsRead
        )
    }
}

string_enum! {
    /// Whether running a tool can change state outside the agent.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Effect as "effect" {
        /// `read_only`: only observes state.
        ReadOnly => "read_only",
        /// `mutating`: may change files, processes, remote systems, ...
        Mutating => "mutating",
    }
}

string_enum! {
    /// Whether an engine may run a call again, e.g. when resuming after a
    /// crash left it unclear whether the first attempt finished.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ReplaySafety as "replay safety" {
        /// `safe`: may be re-run any number of times with no observable effect.
        Safe => "safe",
        /// `idempotent`: re-running with the same arguments has the same
        /// effect as running once.
        Idempotent => "idempotent",
        /// `unsafe`: must not be re-run automatically (e.g. sends a message).
        Unsafe => "unsafe",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn capability_strings_round_trip() {
        let expected = [
            "environment.read",
            "environment.write",
            "filesystem.read",
            "filesystem.write",
            "network.access",
            "process.execute",
            "secrets.read",
        ];
        let actual: Vec<_> = Capability::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(actual, expected);
        for &capability in Capability::ALL {
            assert_eq!(capability.as_str().parse::<Capability>(), Ok(capability));
            assert_eq!(capability.to_string(), capability.as_str());
            assert_eq!(
                serde_json::to_value(capability).unwrap(),
                json!(capability.as_str())
            );
            assert_eq!(
                serde_json::from_value::<Capability>(json!(capability.as_str())).unwrap(),
                capability
            );
        }
    }

    #[test]
    fn capability_ord_agrees_with_string_order() {
        for &a in Capability::ALL {
            for &b in Capability::ALL {
                assert_eq!(a.cmp(&b), a.as_str().cmp(b.as_str()), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn effect_and_replay_safety_strings_round_trip() {
        let effects: Vec<_> = Effect::ALL.iter().map(|e| e.as_str()).collect();
        assert_eq!(effects, ["read_only", "mutating"]);
        for &effect in Effect::ALL {
            assert_eq!(effect.as_str().parse::<Effect>(), Ok(effect));
            assert_eq!(effect.to_string(), effect.as_str());
            assert_eq!(
                serde_json::to_value(effect).unwrap(),
                json!(effect.as_str())
            );
            assert_eq!(
                serde_json::from_value::<Effect>(json!(effect.as_str())).unwrap(),
                effect
            );
        }
        let safeties: Vec<_> = ReplaySafety::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(safeties, ["safe", "idempotent", "unsafe"]);
        for &safety in ReplaySafety::ALL {
            assert_eq!(safety.as_str().parse::<ReplaySafety>(), Ok(safety));
            assert_eq!(safety.to_string(), safety.as_str());
            assert_eq!(
                serde_json::to_value(safety).unwrap(),
                json!(safety.as_str())
            );
            assert_eq!(
                serde_json::from_value::<ReplaySafety>(json!(safety.as_str())).unwrap(),
                safety
            );
        }
    }

    #[test]
    fn unknown_strings_are_rejected_with_the_value_named() {
        let error = "filesystem.Read".parse::<Capability>().unwrap_err();
        assert_eq!(error.kind(), "capability");
        assert_eq!(error.value(), "filesystem.Read");
        let message = error.to_string();
        assert!(message.contains("`filesystem.Read`"), "{message}");
        assert!(
            message.contains("filesystem.read, filesystem.write"),
            "{message}"
        );

        let error = "readonly".parse::<Effect>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown effect `readonly`; expected one of: read_only, mutating"
        );
        let error = "Safe".parse::<ReplaySafety>().unwrap_err();
        assert_eq!(error.kind(), "replay safety");
        assert!(serde_json::from_value::<Capability>(json!("network")).is_err());
        assert!(serde_json::from_value::<Effect>(json!("ReadOnly")).is_err());
        assert!(serde_json::from_value::<ReplaySafety>(json!("SAFE")).is_err());
    }
}
