//! The expansion used after errors.

use super::{Names, types};
use crate::ident;
use crate::transport::compose::Header;
use crate::transport::descriptor::Descriptor;
use proc_macro2::TokenStream;
use quote::quote;
use syn::{Ident, LitStr};

/// The expansion used after errors: every item users name exists, so the one real
/// diagnostic is not followed by unresolved-name noise. Only beans whose type is known get a
/// field, once per field name (duplicates are what the diagnostic is about).
pub fn stub(header: &Header, beans: &[Descriptor]) -> TokenStream {
    let names = Names::new(header);
    let mut fields = std::collections::BTreeSet::new();
    let beans: Vec<Descriptor> = beans
        .iter()
        .filter(|b| !b.key.is_empty())
        .map(|b| {
            // A bean whose name was rejected keeps the field its function name gives it.
            let mut b = b.clone();
            if ident::check(&b.name.value()).is_err() {
                let fn_name = b.fn_ident.to_string();
                b.name = LitStr::new(fn_name.trim_start_matches("r#"), b.fn_ident.span());
            }
            b
        })
        .filter(|b| syn::parse_str::<Ident>(&ident::field_name(&b.name.value())).is_ok())
        .filter(|b| fields.insert(ident::field_name(&b.name.value())))
        .collect();
    let types = types(header, &names, &beans);
    let Names {
        app,
        components,
        overrides,
    } = &names;
    let vis = &header.vis;
    let compose = header.krate.compose();
    quote! {
        #types

        #[automatically_derived]
        #[allow(clippy::unused_async, unreachable_code)]
        impl #app {
            /// Not available: `compose!` reported errors for this graph.
            #vis async fn build() -> ::core::result::Result<Self, #compose::BuildError> {
                ::core::unimplemented!("compose! reported errors for this graph")
            }
            /// Not available: `compose!` reported errors for this graph.
            #vis async fn build_with(_overrides: #overrides) -> ::core::result::Result<Self, #compose::BuildError> {
                ::core::unimplemented!("compose! reported errors for this graph")
            }
            /// Every bean.
            #vis fn components(&self) -> &#components {
                &self.components
            }
            /// Not available: `compose!` reported errors for this graph.
            #vis async fn stop(&self) -> ::core::result::Result<(), #compose::StopError> {
                self.lifecycle.stop().await
            }
            /// Not available: `compose!` reported errors for this graph.
            #vis fn manifest() -> &'static #compose::Manifest {
                ::core::unimplemented!("compose! reported errors for this graph")
            }
            /// Not available: `compose!` reported errors for this graph.
            #vis fn compiled_identities() -> &'static [&'static str] {
                ::core::unimplemented!("compose! reported errors for this graph")
            }
        }
    }
}
