//! Code generation for a resolved graph: the application type, its components and
//! overrides, the construction sequence with rollback, `stop()`, the manifest, and the
//! coherence check that rejects one type written as two keys.

use crate::attr::BeanKind;
use crate::compose::Header;
use crate::descriptor::{Descriptor, ParamDesc};
use crate::factory::Form;
use crate::ident;
use crate::key::{self, ParamShape};
use crate::resolve::{Binding, Resolution};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use std::collections::BTreeMap;
use syn::{Ident, LitStr};

struct Names {
    app: Ident,
    components: Ident,
    overrides: Ident,
}

impl Names {
    fn new(header: &Header) -> Self {
        let app = header.name.clone();
        Names {
            components: format_ident!("{}Components", app),
            overrides: format_ident!("{}Overrides", app),
            app,
        }
    }
}

fn output_of(bean: &Descriptor) -> TokenStream {
    let path = &bean.path;
    quote!(#path::__Bean)
}

fn field_of(bean: &Descriptor) -> Ident {
    syn::parse_str(&ident::field_name(&bean.name.value())).unwrap_or_else(|_| format_ident!("bean"))
}

fn local(bean: &Descriptor) -> Ident {
    format_ident!(
        "__bean_{}",
        ident::field_name(&bean.name.value()).trim_start_matches("r#")
    )
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
            lifecycle: ::agent_core::__private::Lifecycle,
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
                pub #fields: ::agent_core::compose::Override<#outputs>,
            )*
        }

        impl ::core::default::Default for #overrides {
            fn default() -> Self {
                Self { #( #fields: ::core::default::Default::default(), )* }
            }
        }
    }
}

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
    quote! {
        #types

        #[allow(clippy::unused_async, unreachable_code)]
        impl #app {
            /// Not available: `compose!` reported errors for this graph.
            #vis async fn build() -> ::core::result::Result<Self, ::agent_core::compose::BuildError> {
                ::core::unimplemented!("compose! reported errors for this graph")
            }
            /// Not available: `compose!` reported errors for this graph.
            #vis async fn build_with(_overrides: #overrides) -> ::core::result::Result<Self, ::agent_core::compose::BuildError> {
                ::core::unimplemented!("compose! reported errors for this graph")
            }
            /// Every bean.
            #vis fn components(&self) -> &#components {
                &self.components
            }
            /// Not available: `compose!` reported errors for this graph.
            #vis async fn stop(&self) -> ::core::result::Result<(), ::agent_core::compose::StopError> {
                self.lifecycle.stop().await
            }
            /// Not available: `compose!` reported errors for this graph.
            #vis fn manifest() -> &'static ::agent_core::compose::Manifest {
                ::core::unimplemented!("compose! reported errors for this graph")
            }
        }
    }
}

/// The full expansion of a resolved graph.
pub fn generate(
    header: &Header,
    beans: &[Descriptor],
    resolution: &Resolution,
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
    let plan = Stages::new(&resolution.order, beans, resolution);
    let stage_items = plan.items(app, overrides, beans, resolution, current_crate);
    let stage_calls = plan.calls();
    let fields: Vec<Ident> = beans.iter().map(field_of).collect();
    let locals: Vec<TokenStream> = (0..beans.len())
        .map(|i| plan.place(i, None, beans))
        .collect();
    let overrides_binding = if beans.is_empty() {
        quote!(let _ = overrides;)
    } else {
        quote!(let mut overrides = overrides;)
    };
    let manifest = manifest(header, beans, resolution);
    let key_check = key_check(beans, current_crate);
    let build_doc = lit(&format!(
        "Builds every bean of [`{app}`] in dependency order. If a factory fails, the cleanups registered so far run in reverse order and the error names the bean."
    ));
    let stage_structs = plan.structs(app, beans);
    quote! {
        #types
        #stage_structs

        impl #app {
            #[doc = #build_doc]
            #vis async fn build() -> ::core::result::Result<Self, ::agent_core::compose::BuildError> {
                Self::build_with(<#overrides as ::core::default::Default>::default()).await
            }

            /// Like `build`, with some beans replaced; a replacement takes the original's
            /// place in the construction order, and its cleanup runs like the original's.
            #vis async fn build_with(overrides: #overrides) -> ::core::result::Result<Self, ::agent_core::compose::BuildError> {
                let mut __builder = ::agent_core::__private::Builder::new();
                #overrides_binding
                #(#stage_calls)*
                ::core::result::Result::Ok(Self {
                    components: #components { #( #fields: #locals, )* },
                    lifecycle: __builder.finish(),
                })
            }

            #stage_items

            /// Every bean, by canonical name.
            #vis fn components(&self) -> &#components {
                &self.components
            }

            /// Runs every registered cleanup in reverse construction order, exactly once;
            /// later and concurrent calls return the first call's outcome.
            #vis async fn stop(&self) -> ::core::result::Result<(), ::agent_core::compose::StopError> {
                self.lifecycle.stop().await
            }

            /// The graph: every bean, every selection and the construction order.
            #vis fn manifest() -> &'static ::agent_core::compose::Manifest {
                #manifest
            }
        }

        #key_check
    }
}

/// Beans are built in stages of at most [`STAGE`] beans, one `async fn` per stage, each
/// returning a struct of its beans. rustc's type and borrow checking of one `async fn` grows
/// faster than linearly with the values live across its `.await`s, so one function for a
/// thousand beans would dominate build time; stages keep every function small.
pub const STAGE: usize = 32;

struct Stages {
    /// Construction order, cut into stages.
    stages: Vec<Vec<usize>>,
    /// The stage of each bean.
    stage_of: Vec<usize>,
    /// Collections injected somewhere, each built once.
    collections: Vec<Collection>,
    /// For each bean and parameter, the shared collection it receives (a clone of).
    collection_of: std::collections::HashMap<(usize, usize), usize>,
    /// The (bean, parameter) pairs that receive their shared collection by move.
    moves: std::collections::HashSet<(usize, usize)>,
}

/// A `Vec` or `BTreeMap` injection, built once right before its first consumer and cloned
/// into every consumer with the same members (as hand-written code would do).
struct Collection {
    map: bool,
    members: Vec<usize>,
    /// The element type: the first consumer's parameter alias.
    element: TokenStream,
    /// The first consumer, before whose construction the collection is built.
    first: usize,
    /// Whether a stage after the first consumer's uses it (so its stage struct keeps it).
    used_later: bool,
    /// Whether more than one parameter receives it (otherwise it is built inline).
    shared: bool,
}

impl Stages {
    fn new(order: &[usize], beans: &[Descriptor], resolution: &Resolution) -> Self {
        let stages: Vec<Vec<usize>> = order.chunks(STAGE).map(<[usize]>::to_vec).collect();
        let mut stage_of = vec![0; beans.len()];
        for (k, stage) in stages.iter().enumerate() {
            for &i in stage {
                stage_of[i] = k;
            }
        }
        let mut collections: Vec<Collection> = Vec::new();
        let mut collection_of = std::collections::HashMap::new();
        let mut by_content = std::collections::HashMap::new();
        for &i in order {
            for (p, binding) in resolution.bindings[i].iter().enumerate() {
                let (map, members) = match binding {
                    Binding::List(m) if !m.is_empty() => (false, m),
                    Binding::Map(m) if !m.is_empty() => (true, m),
                    _ => continue,
                };
                let param = &beans[i].params[p];
                let content = (map, members.clone(), param.key.clone());
                let c = *by_content.entry(content).or_insert_with(|| {
                    let path = &beans[i].path;
                    let alias = format_ident!("__Param{}", p);
                    collections.push(Collection {
                        map,
                        members: members.clone(),
                        element: quote!(#path::#alias),
                        first: i,
                        used_later: false,
                        shared: false,
                    });
                    collections.len() - 1
                });
                if stage_of[i] != stage_of[collections[c].first] {
                    collections[c].used_later = true;
                }
                collection_of.insert((i, p), c);
            }
        }
        // A collection with one consumer is built inline as its argument, as before.
        let mut consumers = vec![0usize; collections.len()];
        for &c in collection_of.values() {
            consumers[c] += 1;
        }
        collection_of.retain(|_, c| consumers[*c] > 1);
        for (c, collection) in collections.iter_mut().enumerate() {
            collection.shared = consumers[c] > 1;
        }
        // The last consumer in the defining stage takes the collection itself when no later
        // stage needs it.
        let mut last = std::collections::HashMap::new();
        for &i in order {
            for p in 0..resolution.bindings[i].len() {
                if let Some(&c) = collection_of.get(&(i, p)) {
                    last.insert(c, (i, p));
                }
            }
        }
        let moves = last
            .into_iter()
            .filter(|(c, (i, _))| {
                !collections[*c].used_later && stage_of[*i] == stage_of[collections[*c].first]
            })
            .map(|(_, at)| at)
            .collect();
        Stages {
            stages,
            stage_of,
            collections,
            collection_of,
            moves,
        }
    }

    fn collection_local(c: usize) -> Ident {
        format_ident!("__collection_{}", c)
    }

    fn collection_type(&self, c: usize) -> TokenStream {
        let element = &self.collections[c].element;
        if self.collections[c].map {
            quote!(::std::collections::BTreeMap<::std::string::String, #element>)
        } else {
            quote!(::std::vec::Vec<#element>)
        }
    }

    /// Where collection `c` lives while stage `building` runs.
    fn collection_place(&self, c: usize, building: usize) -> TokenStream {
        let l = Self::collection_local(c);
        let k = self.stage_of[self.collections[c].first];
        if k == building {
            quote!(#l)
        } else {
            let stage = Self::param(k);
            quote!(#stage.#l)
        }
    }

    /// `let __collection_c: T = ...;` for the collections first consumed by bean `i`.
    fn collections_before(&self, i: usize, building: usize, beans: &[Descriptor]) -> TokenStream {
        let mut out = TokenStream::new();
        for (c, collection) in self.collections.iter().enumerate() {
            if collection.first != i || !collection.shared {
                continue;
            }
            let l = Self::collection_local(c);
            let ty = self.collection_type(c);
            let clone = |j: usize| {
                let place = self.place(j, Some(building), beans);
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

    fn struct_name(app: &Ident, k: usize) -> Ident {
        format_ident!("__AgentCore{}Stage{}", app, k)
    }

    fn fn_name(k: usize) -> Ident {
        format_ident!("__agent_core_stage_{}", k)
    }

    fn param(k: usize) -> Ident {
        format_ident!("__stage_{}", k)
    }

    /// Where bean `i` lives: a local of the stage being built, or a field of an earlier
    /// stage (or, at the end, of any stage).
    fn place(&self, i: usize, building: Option<usize>, beans: &[Descriptor]) -> TokenStream {
        let l = local(&beans[i]);
        let k = self.stage_of[i];
        if building == Some(k) {
            quote!(#l)
        } else {
            let stage = Self::param(k);
            quote!(#stage.#l)
        }
    }

    /// `let __stage_k = Self::__agent_core_stage_k(...).await?;` for every stage.
    fn calls(&self) -> Vec<TokenStream> {
        (0..self.stages.len())
            .map(|k| {
                let f = Self::fn_name(k);
                let param = Self::param(k);
                let earlier = (0..k).map(Self::param);
                quote! {
                    let #param = Self::#f(&mut __builder, &mut overrides #(, &#earlier)*).await?;
                }
            })
            .collect()
    }

    /// One `async fn` per stage, for the application's `impl` block.
    fn items(
        &self,
        app: &Ident,
        overrides: &Ident,
        beans: &[Descriptor],
        resolution: &Resolution,
        current_crate: &str,
    ) -> TokenStream {
        let mut out = TokenStream::new();
        for (k, stage) in self.stages.iter().enumerate() {
            let name = Self::struct_name(app, k);
            let f = Self::fn_name(k);
            let earlier = (0..k).map(|j| {
                let param = Self::param(j);
                let ty = Self::struct_name(app, j);
                quote!(#param: &#ty)
            });
            let steps = stage.iter().map(|&i| {
                let collections = self.collections_before(i, k, beans);
                let step = construct(i, k, self, beans, &resolution.bindings[i], current_crate);
                quote!(#collections #step)
            });
            let mut locals: Vec<Ident> = stage.iter().map(|&i| local(&beans[i])).collect();
            locals.extend(self.kept_collections(k).map(Self::collection_local));
            out.extend(quote! {
                #[doc(hidden)]
                #[allow(clippy::too_many_arguments, clippy::needless_pass_by_ref_mut)]
                async fn #f(
                    __builder: &mut ::agent_core::__private::Builder,
                    overrides: &mut #overrides
                    #(, #earlier)*
                ) -> ::core::result::Result<#name, ::agent_core::compose::BuildError> {
                    #(#steps)*
                    ::core::result::Result::Ok(#name { #(#locals),* })
                }
            });
        }
        out
    }

    /// The collections built in stage `k` that later stages use.
    fn kept_collections(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        self.collections
            .iter()
            .enumerate()
            .filter(move |(_, c)| c.shared && c.used_later && self.stage_of[c.first] == k)
            .map(|(c, _)| c)
    }

    /// One struct per stage holding its beans, at module level.
    fn structs(&self, app: &Ident, beans: &[Descriptor]) -> TokenStream {
        self.stages
            .iter()
            .enumerate()
            .map(|(k, stage)| {
                let name = Self::struct_name(app, k);
                let mut locals: Vec<Ident> = stage.iter().map(|&i| local(&beans[i])).collect();
                let mut types: Vec<TokenStream> =
                    stage.iter().map(|&i| output_of(&beans[i])).collect();
                for c in self.kept_collections(k) {
                    locals.push(Self::collection_local(c));
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
}

fn construct(
    i: usize,
    building: usize,
    stages: &Stages,
    beans: &[Descriptor],
    bindings: &[Binding],
    current_crate: &str,
) -> TokenStream {
    let bean = &beans[i];
    let path = &bean.path;
    let name = lit(&bean.name.value());
    let field = field_of(bean);
    let local = local(bean);
    let output = output_of(bean);
    let place = |j: usize| stages.place(j, Some(building), beans);
    let args = bean
        .params
        .iter()
        .zip(bindings)
        .enumerate()
        .map(|(index, (p, b))| {
            let shared = stages.collection_of.get(&(i, index)).map(|&c| {
                let place = stages.collection_place(c, building);
                if stages.moves.contains(&(i, index)) {
                    Shared::Move(place)
                } else {
                    Shared::Clone(place)
                }
            });
            argument(p, b, beans, &place, shared, bean.krate == current_crate)
        });
    let call = quote!(#path(#(#args),*));
    let call = if bean.is_async {
        quote!(#call.await)
    } else {
        call
    };
    // The factory is called inline (awaited in place when it is async) and only the cold
    // paths, an override or a rollback, go through `Builder`'s boxed futures. No closure or
    // `async` block per bean: each would be a body of its own for rustc to check, and for an
    // async factory a generic `Builder` future instantiated per bean.
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
    let adapter = format_ident!("{adapter}");
    quote! {
        let #local: #output = match if overrides.#field.is_set() {
            ::core::result::Result::Err(__builder.replaced(#name, &mut overrides.#field))
        } else {
            __builder.built(#name, ::agent_core::__private::#adapter(#call))
        } {
            ::core::result::Result::Ok(value) => value,
            ::core::result::Result::Err(cold) => cold.await?,
        };
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

fn manifest(header: &Header, beans: &[Descriptor], resolution: &Resolution) -> TokenStream {
    let app = lit(&header.name.to_string());
    let entries = beans.iter().map(|b| {
        let name = lit(&b.name.value());
        let aliases = b.aliases.iter().map(|a| lit(&a.value()));
        let qualifiers = b.qualifiers.iter().map(|q| lit(&q.value()));
        let (primary, fallback, order) = (b.primary, b.fallback, b.order);
        let kind = format_ident!(
            "{}",
            match b.kind {
                BeanKind::Bean => "Bean",
                BeanKind::Tool => "Tool",
                BeanKind::Stage => "Stage",
                BeanKind::ModelProvider => "ModelProvider",
            }
        );
        let output = lit(&key::render(&b.output));
        let factory = lit(&b.label());
        let location = lit(&b.location);
        quote! {
            ::agent_core::compose::ManifestBean {
                name: #name,
                aliases: &[#(#aliases),*],
                qualifiers: &[#(#qualifiers),*],
                primary: #primary,
                fallback: #fallback,
                order: #order,
                kind: ::agent_core::compose::BeanKind::#kind,
                output: #output,
                factory: #factory,
                location: #location,
            }
        }
    });
    // Every collection parameter of one type chooses the same members: each distinct list is
    // written once, so the manifest grows with the beans, not with consumers times members.
    let mut lists: BTreeMap<Vec<usize>, Ident> = BTreeMap::new();
    let mut list_items = Vec::new();
    let selections: Vec<TokenStream> = beans
        .iter()
        .zip(&resolution.bindings)
        .flat_map(|(b, bindings)| {
            b.params
                .iter()
                .zip(bindings)
                .enumerate()
                .map(move |(position, (p, binding))| (b, position, p, binding))
        })
        .map(|(b, position, p, binding)| {
            let consumer = lit(&b.name.value());
            let parameter = lit(&p
                .name
                .as_ref()
                .map_or_else(|| format!("#{position}"), ToString::to_string));
            let shape = format_ident!(
                "{}",
                match p.shape {
                    ParamShape::Single => "Single",
                    ParamShape::Optional => "Optional",
                    ParamShape::List => "List",
                    ParamShape::Map => "Map",
                }
            );
            let ty = lit(&key::render(&p.ty));
            let members = binding.members();
            let chosen = if members.len() < 2 {
                let names = members.iter().map(|&j| lit(&beans[j].name.value()));
                quote!(&[#(#names),*])
            } else {
                let next = lists.len();
                let list = lists.entry(members).or_insert_with_key(|members| {
                    let name = format_ident!("__CHOSEN_{}", next);
                    let names = members.iter().map(|&j| lit(&beans[j].name.value()));
                    list_items.push(quote!(const #name: &[&str] = &[#(#names),*];));
                    name
                });
                quote!(#list)
            };
            quote! {
                ::agent_core::compose::ManifestSelection {
                    consumer: #consumer,
                    parameter: #parameter,
                    position: #position,
                    shape: ::agent_core::compose::InjectionShape::#shape,
                    ty: #ty,
                    chosen: #chosen,
                }
            }
        })
        .collect();
    let order = resolution
        .order
        .iter()
        .map(|&i| lit(&beans[i].name.value()));
    quote! {
        #(#list_items)*
        static MANIFEST: ::agent_core::compose::Manifest = ::agent_core::compose::Manifest {
            app: #app,
            beans: &[#(#entries),*],
            selections: &[#(#selections),*],
            order: &[#(#order),*],
        };
        &MANIFEST
    }
}

/// One impl of a local trait per distinct key, each naming its type at the site that wrote
/// it. If two keys are one type (e.g. through a `type` alias), the impls overlap and rustc
/// rejects the program with E0119, naming the trait below: one contract can never be split
/// in two silently.
fn key_check(beans: &[Descriptor], current_crate: &str) -> TokenStream {
    let mut seen = std::collections::BTreeSet::new();
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
                impl EachBeanTypeMustBeWrittenOneWay for #path::__Bean {}
            });
        }
        // A single dependency's key is a bean's key once resolution succeeded; only
        // collections and options can ask for a type no bean produces.
        for (index, p) in b.params.iter().enumerate() {
            if p.shape != ParamShape::Single && seen.insert(p.key.clone()) {
                let span = span_of(&p.bean_ty);
                let alias = format_ident!("__Param{}", index);
                impls.push(quote_spanned! {span=>
                    impl EachBeanTypeMustBeWrittenOneWay for #path::#alias {}
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
