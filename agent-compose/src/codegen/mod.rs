//! Phase 5, generate: plain Rust for a resolved and planned graph.
//!
//! - this module: the generated surface, the application type with its components and
//!   overrides and the `impl` that `build`, `build_with`, `components`, `stop` and
//!   `manifest` live in ([`generate`]);
//! - [`construction`]: one `async fn` per batch of the [`ConstructionPlan`], each bean's
//!   factory call with its override and rollback, and the argument for every parameter;
//! - [`manifest`]: the static `agent_core::compose::Manifest` of the graph;
//! - [`identity`]: the compiled identity of every bean (`compiled_identities()`);
//! - [`coherence`]: the check that rejects one type written as two keys;
//! - [`mod@stub`]: the expansion after an error, so one mistake gives one message.

pub mod coherence;
pub mod construction;
pub mod identity;
pub mod manifest;
pub mod stub;

use crate::graph::Resolution;
use crate::ident;
use crate::naming::{self, Name};
use crate::plan::ConstructionPlan;
use crate::runtime::CratePath;
use crate::transport::compose::Header;
use crate::transport::descriptor::Descriptor;
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Ident, LitStr};

pub use stub::stub;

/// The names of the three generated types.
struct Names {
    app: Ident,
    components: Ident,
    overrides: Ident,
}

impl Names {
    fn new(header: &Header) -> Self {
        let app = header.name.clone();
        Names {
            components: Name::from_user(&app).fixed("Components").call_site(),
            overrides: Name::from_user(&app).fixed("Overrides").call_site(),
            app,
        }
    }
}

/// `path::__Bean`: the bean type, named through the factory's types module.
fn output_of(bean: &Descriptor) -> TokenStream {
    let path = &bean.path;
    quote!(#path::__Bean)
}

/// The bean's field in the components and overrides structs.
fn field_of(bean: &Descriptor) -> Ident {
    naming::user(&ident::field_name(&bean.name.value()), Span::call_site())
}

/// The local that holds the bean while its batch is built.
fn local(bean: &Descriptor) -> Ident {
    Name::new("__bean_")
        .word(&ident::field_name(&bean.name.value()))
        .call_site()
}

fn lit(s: &str) -> LitStr {
    LitStr::new(s, Span::call_site())
}

/// The items shared by the real and the stub expansion: the three structs.
fn types(header: &Header, names: &Names, beans: &[Descriptor]) -> TokenStream {
    let Header { attrs, vis, .. } = header;
    let Names {
        app,
        components,
        overrides,
    } = names;
    let private = header.krate.private();
    let compose = header.krate.compose();
    let fields: Vec<Ident> = beans.iter().map(field_of).collect();
    let outputs: Vec<TokenStream> = beans.iter().map(output_of).collect();
    let docs: Vec<LitStr> = beans
        .iter()
        .map(|b| {
            lit(&format!(
                "The `{}` bean, built by `{}` ({}).",
                b.name.value(),
                b.label(),
                b.location
            ))
        })
        .collect();
    let components_doc = lit(&format!(
        "Every bean of [`{app}`], one field per bean, named after its canonical name."
    ));
    let overrides_doc = lit(&format!(
        "Replacements for beans of [`{app}`], used by [`{app}::build_with`]; every field defaults to no replacement."
    ));
    quote! {
        #(#attrs)*
        #vis struct #app {
            components: #components,
            lifecycle: #private::Lifecycle,
        }

        #[doc = #components_doc]
        #[derive(::core::clone::Clone)]
        #vis struct #components {
            #(
                #[doc = #docs]
                pub #fields: #outputs,
            )*
        }

        #[doc = #overrides_doc]
        #vis struct #overrides {
            #(
                #[doc = #docs]
                pub #fields: #compose::Override<#outputs>,
            )*
        }

        #[automatically_derived]
        impl ::core::default::Default for #overrides {
            fn default() -> Self {
                Self { #( #fields: ::core::default::Default::default(), )* }
            }
        }
    }
}

/// The full expansion of a resolved graph, built as `plan` says.
pub fn generate(
    header: &Header,
    beans: &[Descriptor],
    resolution: &Resolution,
    plan: &ConstructionPlan,
    current_crate: &str,
) -> TokenStream {
    let names = Names::new(header);
    let types = types(header, &names, beans);
    let Names {
        app,
        components,
        overrides,
    } = &names;
    let vis = &header.vis;
    let krate: &CratePath = &header.krate;
    let private = krate.private();
    let compose = krate.compose();
    let construction = construction::Construction {
        plan,
        beans,
        resolution,
        krate,
        current_crate,
    };
    let batch_fns = construction.batch_fns(app, overrides);
    let batch_calls = construction.calls();
    let batch_structs = construction.structs(app);
    let fields: Vec<Ident> = beans.iter().map(field_of).collect();
    let locals: Vec<TokenStream> = (0..beans.len())
        .map(|i| construction.place(i, None))
        .collect();
    let overrides_binding = if beans.is_empty() {
        quote!(let _ = overrides;)
    } else {
        quote!(let mut overrides = overrides;)
    };
    let manifest = manifest::manifest(header, beans, resolution);
    let identities = identity::compiled_identities(beans, krate);
    let key_check = coherence::key_check(beans, current_crate);
    let build_doc = lit(&format!(
        "Builds every bean of [`{app}`] in dependency order. If a factory fails, the cleanups registered so far run in reverse order and the error names the bean."
    ));
    quote! {
        #types
        #batch_structs

        #[automatically_derived]
        impl #app {
            #[doc = #build_doc]
            #vis async fn build() -> ::core::result::Result<Self, #compose::BuildError> {
                Self::build_with(<#overrides as ::core::default::Default>::default()).await
            }

            /// Like `build`, with some beans replaced; a replacement takes the original's
            /// place in the construction order, and its cleanup runs like the original's.
            #vis async fn build_with(overrides: #overrides) -> ::core::result::Result<Self, #compose::BuildError> {
                let mut __builder = #private::Builder::new();
                #overrides_binding
                #(#batch_calls)*
                ::core::result::Result::Ok(Self {
                    components: #components { #( #fields: #locals, )* },
                    lifecycle: __builder.finish(),
                })
            }

            #batch_fns

            /// Every bean, by canonical name.
            #vis fn components(&self) -> &#components {
                &self.components
            }

            /// Runs every registered cleanup in reverse construction order, exactly once;
            /// later and concurrent calls return the first call's outcome.
            #vis async fn stop(&self) -> ::core::result::Result<(), #compose::StopError> {
                self.lifecycle.stop().await
            }

            /// The graph: every bean, every selection and the construction order.
            #vis fn manifest() -> &'static #compose::Manifest {
                #manifest
            }

            /// The compiled identity of every bean, sorted: `<kind>:<name>@<sha256 hex>`
            /// over its kind, name, the factory's canonical path (its crate, modules and
            /// name, whatever path lists it here) and its signature. Every input is fixed
            /// at compile time; the digests are computed on the first call. Give them to
            /// `EngineIdentity::new` so every run's plan identity covers the code.
            #vis fn compiled_identities() -> &'static [&'static str] {
                #identities
            }
        }

        #key_check
    }
}
