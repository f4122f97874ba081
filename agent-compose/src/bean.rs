//! What a descriptor records about a bean's factory: the attribute that annotates it
//! ([`BeanKind`]) and its return form ([`Form`]). The parser (`attr`) finds both and the
//! descriptor (`transport::descriptor`) writes and reads them, so they sit below both.

/// Which bean attribute annotates a factory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BeanKind {
    /// `#[bean]`: any `Clone + Send + Sync + 'static` value.
    Bean,
    /// `#[tool]`: an `Arc<dyn agent_core::tool::Tool>`.
    Tool,
    /// `#[stage]`: an `Arc<dyn Trait>` for some stage contract.
    Stage,
    /// `#[model_provider]`: an `Arc<dyn agent_core::model::ModelProvider>`.
    ModelProvider,
}

impl BeanKind {
    /// Every kind.
    pub const ALL: [BeanKind; 4] = [
        BeanKind::Bean,
        BeanKind::Tool,
        BeanKind::Stage,
        BeanKind::ModelProvider,
    ];

    /// The attribute name.
    pub fn as_str(self) -> &'static str {
        match self {
            BeanKind::Bean => "bean",
            BeanKind::Tool => "tool",
            BeanKind::Stage => "stage",
            BeanKind::ModelProvider => "model_provider",
        }
    }

    /// Parses an attribute name.
    pub fn parse(s: &str) -> Option<Self> {
        BeanKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The variant of `agent_core::compose::BeanKind` that the manifest records for this
    /// kind. The two enums have the same variants with the same names, so generated code
    /// names the runtime variant by this one's own name (`Debug` prints exactly the variant
    /// name): there is no table to keep in step, and a variant missing on either side is a
    /// compile error in every generated manifest.
    pub fn runtime_variant(self) -> proc_macro2::Ident {
        crate::naming::Name::from_word(&format!("{self:?}")).call_site()
    }
}

/// The four accepted return forms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `T`
    Plain,
    /// `Result<T, E>`
    Result,
    /// `Managed<T>`
    Managed,
    /// `Result<Managed<T>, E>`
    ResultManaged,
}

impl Form {
    /// The word used in descriptors.
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Plain => "plain",
            Form::Result => "result",
            Form::Managed => "managed",
            Form::ResultManaged => "result_managed",
        }
    }

    /// Parses the word used in descriptors.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "plain" => Form::Plain,
            "result" => Form::Result,
            "managed" => Form::Managed,
            "result_managed" => Form::ResultManaged,
            _ => return None,
        })
    }
}
