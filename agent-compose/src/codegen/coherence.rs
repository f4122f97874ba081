//! The coherence check: one type written as two keys fails closed.

use crate::key::ParamShape;
use crate::transport::descriptor::Descriptor;
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};

/// One impl of a local trait per distinct type the resolver saw, each naming its type at the
/// site that wrote it. Keys written with longer or shorter paths (`key::compatible`) were
/// grouped as one type by the resolver, so they share one impl. If two groups are one type
/// (e.g. through a `type` alias), the impls overlap and rustc rejects the program with E0119,
/// naming the trait below: one contract can never be split in two silently.
pub fn key_check(beans: &[Descriptor], current_crate: &str) -> TokenStream {
    let mut seen = Seen::default();
    let mut impls = Vec::new();
    for b in beans {
        let path = &b.path;
        let span_of = |tokens: &TokenStream| {
            if b.krate == current_crate {
                tokens
                    .clone()
                    .into_iter()
                    .next()
                    .map_or_else(Span::call_site, |t| t.span())
            } else {
                Span::call_site()
            }
        };
        if seen.insert(b.key.clone()) {
            let span = span_of(&b.output);
            impls.push(quote_spanned! {span=>
                #[automatically_derived] impl EachBeanTypeMustBeWrittenOneWay for #path::__Bean {}
            });
        }
        // A single dependency's key is a bean's key once resolution succeeded; only
        // collections and options can ask for a type no bean produces.
        for (index, p) in b.params.iter().enumerate() {
            if p.shape != ParamShape::Single && seen.insert(p.key.clone()) {
                let span = span_of(&p.bean_ty);
                let alias = crate::naming::Name::new("__Param")
                    .number(index)
                    .call_site();
                impls.push(quote_spanned! {span=>
                    #[automatically_derived] impl EachBeanTypeMustBeWrittenOneWay for #path::#alias {}
                });
            }
        }
    }
    quote! {
        const _: () = {
            #[allow(dead_code)]
            trait EachBeanTypeMustBeWrittenOneWay {}
            #(#impls)*
        };
    }
}

/// The keys given an impl, grouped by `key::tail`: a key joins a group (and gets no impl of
/// its own) when it is compatible with every key of the group.
#[derive(Default)]
struct Seen {
    exact: std::collections::HashSet<String>,
    groups: std::collections::HashMap<String, Vec<Vec<String>>>,
}

impl Seen {
    /// Whether `key` starts a new group, recording it either way.
    fn insert(&mut self, key: String) -> bool {
        if !self.exact.insert(key.clone()) {
            return false;
        }
        let groups = self.groups.entry(crate::key::tail(&key)).or_default();
        if let Some(group) = groups
            .iter_mut()
            .find(|g| g.iter().all(|k| crate::key::compatible(k, &key)))
        {
            group.push(key);
            return false;
        }
        groups.push(vec![key]);
        true
    }
}
