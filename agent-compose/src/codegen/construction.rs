//! The construction code: one `async fn` per batch of the [`ConstructionPlan`], each
//! returning a hidden struct of its beans (and of the shared collections later batches use),
//! the calls that run the batches in turn, and each bean's factory call.

use super::{field_of, lit, local, output_of};
use crate::attr::signature::Form;
use crate::graph::{Binding, Resolution};
use crate::naming::Name;
use crate::plan::ConstructionPlan;
use crate::runtime::CratePath;
use crate::transport::descriptor::{Descriptor, ParamDesc};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;

/// What the construction code is written from.
pub struct Construction<'a> {
    /// How the graph is built.
    pub plan: &'a ConstructionPlan,
    /// The beans, in `compose!` list order.
    pub beans: &'a [Descriptor],
    /// The selection for every parameter.
    pub resolution: &'a Resolution,
    /// How generated code names agent-core.
    pub krate: &'a CratePath,
    /// The crate being compiled (its tokens keep their spans).
    pub current_crate: &'a str,
}

fn collection_local(c: usize) -> Ident {
    Name::new("__collection_").number(c).call_site()
}

fn struct_name(app: &Ident, k: usize) -> Ident {
    Name::new("__AgentCore")
        .user(app)
        .fixed("Batch")
        .number(k)
        .call_site()
}

fn fn_name(k: usize) -> Ident {
    Name::new("__agent_core_batch_").number(k).call_site()
}

/// The parameter (in later batches) or local (in `build_with`) holding batch `k`'s struct.
fn batch_param(k: usize) -> Ident {
    Name::new("__batch_").number(k).call_site()
}

impl Construction<'_> {
    fn collection_type(&self, c: usize) -> TokenStream {
        let collection = &self.plan.collections[c];
        let element = &collection.element;
        if collection.map {
            quote!(::std::collections::BTreeMap<::std::string::String, #element>)
        } else {
            quote!(::std::vec::Vec<#element>)
        }
    }

    /// Where collection `c` lives while batch `building` runs.
    fn collection_place(&self, c: usize, building: usize) -> TokenStream {
        let l = collection_local(c);
        let k = self.plan.batch_of_collection(c);
        if k == building {
            quote!(#l)
        } else {
            let batch = batch_param(k);
            quote!(#batch.#l)
        }
    }

    /// `let __collection_c: T = ...;` for the shared collections first consumed by bean `i`.
    fn collections_before(&self, i: usize, building: usize) -> TokenStream {
        let beans = self.beans;
        let mut out = TokenStream::new();
        for (c, collection) in self.plan.collections.iter().enumerate() {
            if collection.first != i || !collection.shared {
                continue;
            }
            let l = collection_local(c);
            let ty = self.collection_type(c);
            let clone = |j: usize| {
                let place = self.place(j, Some(building));
                quote!(::core::clone::Clone::clone(&#place))
            };
            let value = if collection.map {
                // Sorted by key, so building the map needs no reordering.
                let mut members = collection.members.clone();
                members.sort_by_key(|&j| beans[j].name.value());
                let entries = members.iter().map(|&j| {
                    let key = lit(&beans[j].name.value());
                    let v = clone(j);
                    quote!((::std::string::String::from(#key), #v))
                });
                quote!(::core::iter::FromIterator::from_iter([#(#entries),*]))
            } else {
                let values = collection.members.iter().map(|&j| clone(j));
                quote!(::std::vec::Vec::from([#(#values),*]))
            };
            out.extend(quote!(let #l: #ty = #value;));
        }
        out
    }

    /// Where bean `i` lives: a local of the batch being built, or a field of an earlier
    /// batch (or, at the end, of any batch).
    pub fn place(&self, i: usize, building: Option<usize>) -> TokenStream {
        let l = local(&self.beans[i]);
        let k = self.plan.batch_of[i];
        if building == Some(k) {
            quote!(#l)
        } else {
            let batch = batch_param(k);
            quote!(#batch.#l)
        }
    }

    /// `let __batch_k = Self::__agent_core_batch_k(...).await?;` for every batch.
    pub fn calls(&self) -> Vec<TokenStream> {
        (0..self.plan.batches.len())
            .map(|k| {
                let f = fn_name(k);
                let param = batch_param(k);
                let earlier = (0..k).map(batch_param);
                quote! {
                    let #param = Self::#f(&mut __builder, &mut overrides #(, &#earlier)*).await?;
                }
            })
            .collect()
    }

    /// One `async fn` per batch, for the application's `impl` block.
    pub fn batch_fns(&self, app: &Ident, overrides: &Ident) -> TokenStream {
        let private = self.krate.private();
        let compose = self.krate.compose();
        let mut out = TokenStream::new();
        for (k, batch) in self.plan.batches.iter().enumerate() {
            let name = struct_name(app, k);
            let f = fn_name(k);
            let earlier = (0..k).map(|j| {
                let param = batch_param(j);
                let ty = struct_name(app, j);
                quote!(#param: &#ty)
            });
            let steps = batch.iter().map(|&i| {
                let collections = self.collections_before(i, k);
                let step = self.construct(i, k);
                quote!(#collections #step)
            });
            let mut locals: Vec<Ident> = batch.iter().map(|&i| local(&self.beans[i])).collect();
            locals.extend(self.plan.kept_collections(k).map(collection_local));
            out.extend(quote! {
                #[doc(hidden)]
                #[allow(clippy::too_many_arguments, clippy::needless_pass_by_ref_mut)]
                async fn #f(
                    __builder: &mut #private::Builder,
                    overrides: &mut #overrides
                    #(, #earlier)*
                ) -> ::core::result::Result<#name, #compose::BuildError> {
                    #(#steps)*
                    ::core::result::Result::Ok(#name { #(#locals),* })
                }
            });
        }
        out
    }

    /// One struct per batch holding its beans, at module level.
    pub fn structs(&self, app: &Ident) -> TokenStream {
        self.plan
            .batches
            .iter()
            .enumerate()
            .map(|(k, batch)| {
                let name = struct_name(app, k);
                let mut locals: Vec<Ident> = batch.iter().map(|&i| local(&self.beans[i])).collect();
                let mut types: Vec<TokenStream> =
                    batch.iter().map(|&i| output_of(&self.beans[i])).collect();
                for c in self.plan.kept_collections(k) {
                    locals.push(collection_local(c));
                    types.push(self.collection_type(c));
                }
                quote! {
                    #[doc(hidden)]
                    #[allow(non_camel_case_types)]
                    struct #name { #(#locals: #types),* }
                }
            })
            .collect()
    }

    /// Builds bean `i` inside batch `building`.
    fn construct(&self, i: usize, building: usize) -> TokenStream {
        let beans = self.beans;
        let bean = &beans[i];
        let bindings = &self.resolution.bindings[i];
        let path = &bean.path;
        let name = lit(&bean.name.value());
        let field = field_of(bean);
        let local = local(bean);
        let output = output_of(bean);
        let place = |j: usize| self.place(j, Some(building));
        let args = bean
            .params
            .iter()
            .zip(bindings)
            .enumerate()
            .map(|(index, (p, b))| {
                let shared = self.plan.collection_of.get(&(i, index)).map(|&c| {
                    let place = self.collection_place(c, building);
                    if self.plan.moves.contains(&(i, index)) {
                        Shared::Move(place)
                    } else {
                        Shared::Clone(place)
                    }
                });
                argument(
                    p,
                    b,
                    beans,
                    &place,
                    shared,
                    bean.krate == self.current_crate,
                )
            });
        let call = quote!(#path(#(#args),*));
        let call = if bean.is_async {
            quote!(#call.await)
        } else {
            call
        };
        // The factory is called inline (awaited in place when it is async) and only the cold
        // paths, an override or a rollback, go through `Builder`'s boxed futures. No closure
        // or `async` block per bean: each would be a body of its own for rustc to check, and
        // for an async factory a generic `Builder` future instantiated per bean.
        let adapter = match bean.form {
            Form::Plain => {
                return quote! {
                    let #local: #output = if overrides.#field.is_set() {
                        __builder.replaced(#name, &mut overrides.#field).await?
                    } else {
                        #call
                    };
                };
            }
            Form::Result => "from_result",
            Form::Managed => "from_managed",
            Form::ResultManaged => "from_result_managed",
        };
        let adapter = crate::naming::fixed(adapter);
        let private = self.krate.private();
        quote! {
            let #local: #output = match if overrides.#field.is_set() {
                ::core::result::Result::Err(__builder.replaced(#name, &mut overrides.#field))
            } else {
                __builder.built(#name, #private::#adapter(#call))
            } {
                ::core::result::Result::Ok(value) => value,
                ::core::result::Result::Err(cold) => cold.await?,
            };
        }
    }
}

/// How a consumer receives a shared collection.
enum Shared {
    Clone(TokenStream),
    Move(TokenStream),
}

/// The value passed for one parameter. Within one crate it is spanned at the parameter's
/// type, so if the selected bean's type is not the parameter's, rustc reports it there.
fn argument(
    param: &ParamDesc,
    binding: &Binding,
    beans: &[Descriptor],
    place: &dyn Fn(usize) -> TokenStream,
    shared: Option<Shared>,
    local_tokens: bool,
) -> TokenStream {
    let span = if local_tokens {
        param
            .ty
            .clone()
            .into_iter()
            .next()
            .map_or_else(Span::call_site, |t| t.span())
    } else {
        Span::call_site()
    };
    let clone = |j: usize| {
        let l = place(j);
        quote_spanned!(span=> ::core::clone::Clone::clone(&#l))
    };
    match shared {
        Some(Shared::Clone(collection)) => {
            return quote_spanned!(span=> ::core::clone::Clone::clone(&#collection));
        }
        Some(Shared::Move(collection)) => return collection,
        None => {}
    }
    match binding {
        Binding::Single(j) => clone(*j),
        Binding::Optional(Some(j)) => {
            let v = clone(*j);
            quote_spanned!(span=> ::core::option::Option::Some(#v))
        }
        Binding::Optional(None) => quote_spanned!(span=> ::core::option::Option::None),
        Binding::List(members) if members.is_empty() => {
            quote_spanned!(span=> ::std::vec::Vec::new())
        }
        Binding::List(members) => {
            let values = members.iter().map(|&j| clone(j));
            quote_spanned!(span=> ::std::vec::Vec::from([#(#values),*]))
        }
        Binding::Map(members) if members.is_empty() => {
            quote_spanned!(span=> ::std::collections::BTreeMap::new())
        }
        Binding::Map(members) => {
            let entries = members.iter().map(|&j| {
                let key = lit(&beans[j].name.value());
                let v = clone(j);
                quote_spanned!(span=> (::std::string::String::from(#key), #v))
            });
            quote_spanned!(span=> ::std::collections::BTreeMap::from([#(#entries),*]))
        }
    }
}
