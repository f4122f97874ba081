//! The daemon-token rule (docs/protocol.md, "Tokens"): client ids, operation ids, operation kinds
//! and definition ids and revisions.
//!
//! The rule is stated once, in the run authority below the daemon (it applies it to run ids):
//! this module only names it for the daemon's tables.

/// The longest daemon token, in bytes.
pub use agent_authority::MAX_DAEMON_TOKEN_BYTES as MAX_TOKEN_BYTES;
/// Whether `value` is a daemon token: non-empty, unchanged by trimming, at most
/// [`MAX_TOKEN_BYTES`] bytes and without any Unicode control character.
pub use agent_authority::is_daemon_token;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_holds_at_and_past_the_bound() {
        assert!(is_daemon_token(&"a".repeat(MAX_TOKEN_BYTES)));
        assert!(!is_daemon_token(&"a".repeat(MAX_TOKEN_BYTES + 1)));
        for bad in ["", " a", "a ", "a\u{0}b", "a\u{7f}", "a\tb", "a\u{85}"] {
            assert!(!is_daemon_token(bad), "{bad:?}");
        }
        assert!(is_daemon_token("coding/agent-1"));
    }
}
