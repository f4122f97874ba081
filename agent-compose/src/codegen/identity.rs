//! The compiled identities of a graph: one per bean, derived from what the factory is
//! (kind, canonical name, the factory's canonical path and its signature), so the same source
//! gives the same identities in every build, whatever path or import `compose!` reaches a
//! factory by, and any change to one of those facts gives another.
//!
//! Each identity reads `<kind>:<canonical name>@<hex>`. A proc macro cannot know the module
//! it runs in, so the identity is finished where that is known: this module hashes what the
//! descriptor says (the kind, the name and the signature; see [`signature_digest`]), and the
//! generated `compiled_identities()` hands that digest, with the factory's `module_path!()`
//! recorded by the attribute in its types module (`<path>::__FACTORY`), to agent-core's
//! hidden runtime, which hashes the two on the first call (`CompiledIdentities`). Every hash
//! is SHA-256 over length-prefixed fields (the kernel's convention). The path written in
//! `compose!` and the source location are left out on purpose: neither changes what the
//! factory is.

use super::lit;
use crate::key;
use crate::runtime::CratePath;
use crate::transport::descriptor::Descriptor;
use proc_macro2::TokenStream;
use quote::quote;
use sha2::{Digest, Sha256};

/// Names this derivation; a change to it changes every identity.
const VERSION: &str = "agent-core.compiled-identity/v2";

/// `<kind>:<canonical name>`, the identity's readable head.
fn head(bean: &Descriptor) -> String {
    format!("{}:{}", bean.kind.as_str(), bean.name.value())
}

/// The hex SHA-256 of the version tag, kind, canonical name and signature (`async`, return
/// form, bean type, and each parameter's name, type and qualifiers): everything of the
/// identity but the factory's canonical path.
pub fn signature_digest(bean: &Descriptor) -> String {
    let mut fields: Vec<String> = vec![
        VERSION.to_owned(),
        bean.kind.as_str().to_owned(),
        bean.name.value(),
        if bean.is_async { "async" } else { "sync" }.to_owned(),
        bean.form.as_str().to_owned(),
        key::render(&bean.output),
    ];
    for param in &bean.params {
        fields.push(
            param
                .name
                .as_ref()
                .map_or_else(|| "_".to_owned(), ToString::to_string),
        );
        fields.push(key::render(&param.ty));
        fields.push(param.qualifiers.len().to_string());
        fields.extend(param.qualifiers.iter().map(syn::LitStr::value));
    }
    hex(&fields)
}

/// Lowercase hex SHA-256 of length-prefixed fields.
fn hex(fields: &[String]) -> String {
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field.as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The identity of one bean whose factory's canonical path is `factory`: what the generated
/// code computes at run time, for this crate's tests.
pub fn identity(bean: &Descriptor, factory: &str) -> String {
    let digest = hex(&[signature_digest(bean), factory.to_owned()]);
    format!("{}@{digest}", head(bean))
}

/// The body of the generated `compiled_identities()`: every bean's facts, finished and
/// sorted by agent-core on the first call.
pub fn compiled_identities(beans: &[Descriptor], krate: &CratePath) -> TokenStream {
    let private = krate.private();
    let facts = beans.iter().map(|bean| {
        let head = lit(&head(bean));
        let digest = lit(&signature_digest(bean));
        let path = &bean.path;
        quote!(#private::BeanIdentity::new(#head, #digest, #path::__FACTORY))
    });
    quote! {
        static IDENTITIES: #private::CompiledIdentities =
            #private::CompiledIdentities::new(&[#(#facts),*]);
        IDENTITIES.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::signature::Form;
    use crate::transport::descriptor::tests::sample;
    use proc_macro2::Span;
    use syn::LitStr;

    const SITE: &str = "app::tools::read_tool";

    #[test]
    fn the_same_source_gives_the_same_identity() {
        let id = identity(&sample(), SITE);
        assert_eq!(id, identity(&sample(), SITE));
        let (head, hex) = id.split_once('@').unwrap();
        assert_eq!(head, "tool:read");
        assert_eq!(hex.len(), 64);
        assert!(
            hex.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        // Where the factory sits in its file is not part of what it is.
        let mut moved = sample();
        moved.location = "src/tools.rs:90:8".into();
        assert_eq!(identity(&moved, SITE), id);
    }

    #[test]
    fn the_path_written_in_compose_is_not_part_of_it() {
        let id = identity(&sample(), SITE);
        for written in [
            quote!(crate::tools::read_tool),
            quote!(read_tool),
            quote!(::app::tools::read_tool),
        ] {
            let mut other = sample();
            other.path = written.clone();
            assert_eq!(identity(&other, SITE), id, "{written}");
        }
        // The factory's own path is.
        assert_ne!(identity(&sample(), "app::other::read_tool"), id);
        assert_ne!(identity(&sample(), "lib::tools::read_tool"), id);
    }

    /// One change to a descriptor, named.
    type Change = (&'static str, fn(&mut Descriptor));

    #[test]
    fn any_change_of_name_kind_or_signature_changes_it() {
        let base = identity(&sample(), SITE);
        let changes: Vec<Change> = vec![
            ("name", |d| {
                d.name = LitStr::new("reader", Span::call_site())
            }),
            ("kind", |d| d.kind = crate::BeanKind::Bean),
            ("async", |d| d.is_async = false),
            ("return form", |d| d.form = Form::Plain),
            ("output type", |d| d.output = quote!(Arc<dyn Other>)),
            ("parameter type", |d| {
                d.params[0].ty = quote!(Vec<Arc<Other>>)
            }),
            ("parameter name", |d| {
                d.params[0].name = Some(syn::Ident::new("journal", Span::call_site()))
            }),
            ("parameter qualifier", |d| {
                d.params[0].qualifiers = vec![LitStr::new("y", Span::call_site())]
            }),
            ("parameter count", |d| d.params.clear()),
        ];
        for (what, change) in changes {
            let mut changed = sample();
            change(&mut changed);
            assert_ne!(identity(&changed, SITE), base, "{what}");
        }
    }

    #[test]
    fn a_changed_signature_changes_only_that_beans_identity() {
        let mut other = sample();
        other.name = LitStr::new("alpha", Span::call_site());
        let before = [identity(&sample(), SITE), identity(&other, "app::alpha")];
        other.params.clear();
        let graph = compiled_identities(&[sample(), other.clone()], &CratePath::default());
        let graph = graph.to_string();
        assert!(graph.contains(&signature_digest(&sample())), "{graph}");
        assert!(graph.contains(&signature_digest(&other)), "{graph}");
        assert_eq!(identity(&sample(), SITE), before[0]);
        assert_ne!(identity(&other, "app::alpha"), before[1]);
    }

    #[test]
    fn each_bean_names_its_factory_site() {
        let mut other = sample();
        other.path = quote!(graph::alpha);
        let tokens = compiled_identities(&[sample(), other], &CratePath::default()).to_string();
        assert!(
            tokens.contains("tools :: read_tool :: __FACTORY"),
            "{tokens}"
        );
        assert!(tokens.contains("graph :: alpha :: __FACTORY"), "{tokens}");
        assert!(tokens.contains("\"tool:read\""), "{tokens}");
    }
}
