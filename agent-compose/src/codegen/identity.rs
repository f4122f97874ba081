//! The compiled identities of a graph: one per bean, derived from what the descriptors say
//! (kind, canonical name, factory path and signature), so the same source gives the same
//! identities in every build and any change to one of those gives another.
//!
//! Each identity reads `<kind>:<canonical name>@<hex>`, where `<hex>` is the SHA-256 of the
//! length-prefixed fields below (the kernel's hashing convention). The source location is
//! left out on purpose: moving a factory within its file is not a change of what it is.

use super::lit;
use crate::key;
use crate::transport::descriptor::Descriptor;
use proc_macro2::TokenStream;
use quote::quote;
use sha2::{Digest, Sha256};

/// Names this derivation; a change to it changes every identity.
const VERSION: &str = "agent-core.compiled-identity/v1";

/// The identity of one bean.
pub fn identity(bean: &Descriptor) -> String {
    let name = bean.name.value();
    let mut fields: Vec<String> = vec![
        VERSION.to_owned(),
        bean.kind.as_str().to_owned(),
        name.clone(),
        bean.label(),
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
    let mut hasher = Sha256::new();
    for field in &fields {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field.as_bytes());
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{}:{name}@{hex}", bean.kind.as_str())
}

/// The body of the generated `compiled_identities()`: every bean's identity, sorted.
pub fn compiled_identities(beans: &[Descriptor]) -> TokenStream {
    let mut identities: Vec<String> = beans.iter().map(identity).collect();
    identities.sort();
    identities.dedup();
    let identities = identities.iter().map(|i| lit(i));
    quote!(&[#(#identities),*])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::signature::Form;
    use crate::transport::descriptor::tests::sample;
    use proc_macro2::Span;
    use syn::LitStr;

    #[test]
    fn the_same_source_gives_the_same_identity() {
        let id = identity(&sample());
        assert_eq!(id, identity(&sample()));
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
        assert_eq!(identity(&moved), id);
    }

    /// One change to a descriptor, named.
    type Change = (&'static str, fn(&mut Descriptor));

    #[test]
    fn any_change_of_name_kind_path_or_signature_changes_it() {
        let base = identity(&sample());
        let changes: Vec<Change> = vec![
            ("name", |d| {
                d.name = LitStr::new("reader", Span::call_site())
            }),
            ("kind", |d| d.kind = crate::BeanKind::Bean),
            ("factory path", |d| d.path = quote!(other::read_tool)),
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
            assert_ne!(identity(&changed), base, "{what}");
        }
    }

    #[test]
    fn the_list_is_sorted_and_unique() {
        let mut other = sample();
        other.name = LitStr::new("alpha", Span::call_site());
        let tokens = compiled_identities(&[sample(), other, sample()]).to_string();
        let alpha = tokens.find("tool:alpha@").unwrap();
        let read = tokens.find("tool:read@").unwrap();
        assert!(alpha < read);
        assert_eq!(tokens.matches("tool:read@").count(), 1);
    }
}
