//! Expansion of the bean attributes and of the modifier attributes written above them.
//!
//! A bean attribute keeps the function as written (minus the metadata attributes it
//! consumed) and adds three items that share the function's name in the other namespaces:
//!
//! * a hidden module (type namespace) whose type aliases `__Bean` and `__Param<N>` name the
//!   bean type and the type each collection or optional parameter `N` asks for. They point
//!   to hidden aliases beside the function, written with the user's own tokens in the
//!   function's own scope, so generated code never re-resolves a forwarded type at the
//!   `compose!` site. (Aliases, unlike projections, are transparent to coherence, which the
//!   alias check in `codegen::coherence` relies on across crates; and no glob import is
//!   needed, which keeps name resolution linear in the number of factories);
//! * a `#[macro_export]` descriptor macro with a collision-proof name, re-exported under the
//!   function's name (macro namespace), which hands the descriptor to the next link of a
//!   `compose!` chain;
//! * a compile-time assertion that the output fits the attribute (`#[tool]`,
//!   `#[model_provider]`, `#[stage]`).

use crate::attr::args::{self, BeanKind, BeanMeta, Modifier};
use crate::attr::item::FactoryFn;
use crate::attr::signature;
use crate::attr::typed;
use crate::diag::{self, Code, Errors};
use crate::key;
use crate::location;
use crate::naming::{self, Name};
use crate::nesting::{self, Body};
use crate::runtime::CratePath;
use crate::transport::descriptor::{Descriptor, ParamDesc};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, LitStr};

/// Everything a bean attribute learned about its factory.
pub struct Analysis {
    /// The function, minus the metadata attributes that were consumed.
    pub function: FactoryFn,
    /// The descriptor handed to `compose!` (poisoned when `errors` is not empty).
    pub descriptor: Descriptor,
    /// Hidden aliases beside the function, where the types were written.
    aliases: Vec<TokenStream>,
    /// The types module's aliases to them.
    inner_aliases: Vec<TokenStream>,
    /// The assertion that the output fits the attribute.
    domain_check: TokenStream,
    /// Uses that keep consumed modifier paths resolved and their imports used.
    consumed_uses: TokenStream,
    /// Every mistake found.
    pub errors: Errors,
}

/// Expands `#[kind(args)]` on `item`.
///
/// The path is one-way: a typed tool is rewritten ([`typed::rewrite`]) and its factory
/// analyzed here; nothing below this function expands again, so no input can make the
/// expansion recurse (an item that cannot be rewritten goes through the plain pipeline,
/// which reports why).
pub fn expand(kind: BeanKind, args: TokenStream, item: TokenStream) -> TokenStream {
    let (args, item) = if kind == BeanKind::Tool && typed::is_typed(&args, &item) {
        match typed::rewrite(args, item) {
            Ok(rewritten) => return expand_typed(rewritten),
            Err(input) => input,
        }
    } else {
        (args, item)
    };
    match analyze(kind, args, item) {
        Ok(analysis) => render(analysis),
        Err(tokens) => tokens,
    }
}

/// The factory of a rewritten typed tool through the pipeline, keyed as a tool.
fn expand_typed(rewritten: typed::Rewritten) -> TokenStream {
    let typed::Rewritten {
        hidden_fn,
        factory,
        factory_args,
        errors,
    } = rewritten;
    let own_errors = errors.to_compile_errors();
    let mut analysis = match analyze(BeanKind::Tool, factory_args, factory) {
        Ok(analysis) => analysis,
        Err(tokens) => return quote!(#own_errors #hidden_fn #tokens),
    };
    let tool_key = typed::tool_key();
    analysis.descriptor.key = key::of(&tool_key);
    analysis.descriptor.keyed = Some(quote!(#tool_key));
    if !errors.is_empty() {
        analysis.descriptor.poisoned = true;
    }
    let rendered = render(analysis);
    quote! {
        #own_errors
        #hidden_fn
        #rendered
    }
}

/// Parses and validates one factory. `Err` carries the output for an item that is not a
/// function at all (the error plus the untouched item), or that is nested too deeply to
/// parse (see `unparsed`).
pub fn analyze(
    kind: BeanKind,
    args: TokenStream,
    item: TokenStream,
) -> Result<Analysis, TokenStream> {
    let deep = nesting::check(&args, Body::Scan)
        .and_then(|()| nesting::check(&item, Body::Skip))
        .err();
    if let Some(err) = deep {
        return Err(unparsed(kind, err, item));
    }
    let mut function: FactoryFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => return Err(not_a_function(kind, item)),
    };
    let mut errors = Errors::default();
    let mut meta = BeanMeta::default();
    args::parse_bean_args(args, &mut meta, &mut errors);
    let mut consumed = Vec::new();
    function.attrs = consume_fn_attrs(
        kind,
        std::mem::take(&mut function.attrs),
        &mut meta,
        &mut consumed,
        &mut errors,
    );
    let param_qualifiers = consume_param_attrs(&mut function, &mut consumed, &mut errors);
    // The modifiers this attribute read never expand, but their paths must still resolve
    // (as every attribute's must) and their imports count as used.
    let consumed_uses = if consumed.is_empty() {
        TokenStream::new()
    } else {
        let uses = consumed
            .iter()
            .map(|p| quote_spanned!(p.span()=> #[allow(unused_imports)] use #p as _;));
        quote!(const _: () = { #(#uses)* };)
    };
    let fn_name = function.sig.ident.to_string();
    let default_name = fn_name.strip_prefix("r#").unwrap_or(&fn_name).to_owned();
    args::validate(&meta, &default_name, function.sig.ident.span(), &mut errors);
    for qualifiers in &param_qualifiers {
        args::check_qualifiers(qualifiers, &mut errors);
    }
    let sig = signature::analyze(&function.sig, param_qualifiers, &mut errors);
    let mut domain_check = TokenStream::new();
    if let Some(sig) = &sig {
        let krate = meta.krate.clone().map(|(path, _)| path).unwrap_or_default();
        domain_check = output_check(kind, &sig.value, &krate, &mut errors);
    }
    let fn_ident = function.sig.ident.clone();
    let location = location::of(fn_ident.span());
    let krate = std::env::var("CARGO_CRATE_NAME").unwrap_or_default();
    let name = meta
        .name
        .clone()
        .unwrap_or_else(|| LitStr::new(&default_name, fn_ident.span()));
    let poisoned = !errors.is_empty();
    let vis = function.vis.clone();
    let mut inner_aliases = Vec::new();
    let (form, is_async, output, value_key, params, aliases) = match &sig {
        Some(sig) => {
            let value = &sig.value;
            // Each alias is defined beside the function, where its tokens were written, and
            // re-exported by the types module under a fixed name.
            let mut aliases = Vec::new();
            let mut alias = |local_name: syn::Ident, exported: syn::Ident, ty: &syn::Type| {
                aliases.push(quote_spanned! {ty.span()=>
                    #[doc(hidden)]
                    #[allow(non_camel_case_types, unreachable_pub)]
                    #vis type #local_name = #ty;
                });
                inner_aliases.push(quote!(pub type #exported = super::#local_name;));
            };
            alias(
                Name::new("__agent_core_")
                    .user(&fn_ident)
                    .fixed("_bean")
                    .call_site(),
                naming::fixed("__Bean"),
                value,
            );
            let mut params = Vec::new();
            for (index, p) in sig.params.iter().enumerate() {
                // Generated code names a requested type only for collections and options
                // (a collection's element type, and the alias check for a type no bean
                // produces). A single dependency is the chosen bean's own value, so its
                // type needs no alias: fewer items make every build of the crate cheaper.
                if p.shape != key::ParamShape::Single {
                    alias(
                        Name::new("__agent_core_")
                            .user(&fn_ident)
                            .fixed("_param")
                            .number(index)
                            .call_site(),
                        Name::new("__Param").number(index).call_site(),
                        &p.bean_ty,
                    );
                }
                params.push(ParamDesc {
                    name: p.name.clone(),
                    shape: p.shape.clone(),
                    key: key::of(&p.bean_ty),
                    ty: signature::tokens(&p.ty),
                    bean_ty: signature::tokens(&p.bean_ty),
                    qualifiers: p.qualifiers.clone(),
                });
            }
            (
                sig.form,
                sig.is_async,
                signature::tokens(value),
                key::of(value),
                params,
                aliases,
            )
        }
        None => (
            signature::Form::Plain,
            false,
            quote!(()),
            String::new(),
            Vec::new(),
            Vec::new(),
        ),
    };
    let descriptor = Descriptor {
        path: TokenStream::new(),
        kind,
        fn_ident: fn_ident.clone(),
        name,
        aliases: meta.aliases.clone(),
        qualifiers: meta.qualifiers.clone(),
        primary: meta.primary.is_some(),
        fallback: meta.fallback.is_some(),
        order: meta.order.map_or(0, |(v, _)| v),
        is_async,
        form,
        output,
        key: value_key,
        keyed: None,
        params,
        location,
        krate,
        poisoned,
    };
    Ok(Analysis {
        function,
        descriptor,
        aliases,
        inner_aliases,
        domain_check,
        consumed_uses,
        errors,
    })
}

/// Writes the function, its aliases, types module and descriptor.
pub fn render(analysis: Analysis) -> TokenStream {
    let Analysis {
        function,
        descriptor,
        aliases,
        inner_aliases,
        domain_check,
        consumed_uses,
        errors,
    } = analysis;
    let fn_ident = &function.sig.ident;
    let vis = &function.vis;
    let export = export_name("bean", &descriptor.krate, fn_ident, &descriptor.location);
    let fields = descriptor.fields();
    let me = crate::transport::chain::me();
    let chain =
        crate::transport::chain::descriptor_macro(&export, &quote!({ path = { #me } #fields }));
    let compile_errors = errors.to_compile_errors();
    quote! {
        #compile_errors
        #function
        #consumed_uses

        #(#aliases)*

        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code, missing_docs, unreachable_pub)]
        #vis mod #fn_ident {
            #(#inner_aliases)*
            // The factory's canonical path (`<crate>::<modules>::<factory>`, this module
            // sharing the function's name) for its compiled identity: only code at the
            // factory's site can know it (see `codegen::identity`).
            pub const __FACTORY: &str = ::core::module_path!();
        }

        #domain_check
        #chain

        #[doc(hidden)]
        #[allow(unused_imports, unreachable_pub)]
        #vis use #export as #fn_ident;
    }
}

/// A crate-root-unique, reproducible name for an exported macro:
/// `__agent_core_<what>_<crate>_<item>_<hash>`, the item without `r#`. The hash of the parts
/// and the location separates two items of one name defined in one crate.
pub fn export_name(
    what: &'static str,
    krate: &str,
    item: &syn::Ident,
    location: &str,
) -> syn::Ident {
    Name::new("__agent_core_")
        .fixed(what)
        .fixed("_")
        .word(krate)
        .fixed("_")
        .user(item)
        .hashed(&[location])
        .call_site()
}

/// The expansion for an item that is not a complete function (a struct, an `impl` block, a
/// function without a body, a macro call, nothing at all): the coded error and the item as
/// written, minus the attributes this crate reads (they would expand again or fail to
/// resolve). No descriptor is written: there is no function whose name it could take.
fn not_a_function(kind: BeanKind, item: TokenStream) -> TokenStream {
    let (what, span) = item_name(&item);
    let errors = diag::error(
        Code::NotAFunction,
        span,
        format!(
            "`#[{}]` applies to a function that builds the bean, not to {what}",
            kind.as_str()
        ),
    )
    .to_compile_error();
    let trees: Vec<proc_macro2::TokenTree> = item.into_iter().collect();
    let (mut kept, at) = without_own_attrs(&trees);
    kept.extend(trees[at..].iter().cloned());
    quote!(#errors #kept)
}

/// The leading outer attributes (`#` and a bracket group each) that this crate does not read,
/// and the index of the first tree after all leading attributes.
fn without_own_attrs(trees: &[proc_macro2::TokenTree]) -> (TokenStream, usize) {
    use proc_macro2::{Delimiter, TokenTree};
    let mut kept = TokenStream::new();
    let mut at = 0;
    while let (Some(TokenTree::Punct(hash)), Some(TokenTree::Group(group))) =
        (trees.get(at), trees.get(at + 1))
    {
        if hash.as_char() != '#' || group.delimiter() != Delimiter::Bracket {
            break;
        }
        let path: Vec<String> = group
            .stream()
            .into_iter()
            .take_while(|t| match t {
                TokenTree::Ident(_) => true,
                TokenTree::Punct(p) => p.as_char() == ':',
                _ => false,
            })
            .filter_map(|t| match t {
                TokenTree::Ident(i) => Some(i.to_string()),
                _ => None,
            })
            .collect();
        let ours = path.first().is_some_and(|first| first == MOVED)
            || path.last().is_some_and(|last| {
                Modifier::parse(last).is_some() || BeanKind::parse(last).is_some()
            });
        if !ours {
            kept.extend([trees[at].clone(), trees[at + 1].clone()]);
        }
        at += 2;
    }
    (kept, at)
}

/// The expansion for an item too deeply nested to parse: the error, the item without the
/// attributes this crate reads (they would expand again or fail to resolve), and, for a
/// function, a poisoned descriptor under its name, so a `compose!` that lists it stays quiet.
/// Qualifiers on its parameters are left in place.
fn unparsed(kind: BeanKind, err: syn::Error, item: TokenStream) -> TokenStream {
    use proc_macro2::{Delimiter, TokenTree};
    let errors = err.to_compile_error();
    let trees: Vec<TokenTree> = item.into_iter().collect();
    let (mut kept, at) = without_own_attrs(&trees);
    let rest = &trees[at..];
    kept.extend(rest.iter().cloned());
    let fn_ident = rest.windows(2).find_map(|pair| match pair {
        [TokenTree::Ident(f), TokenTree::Ident(name)] if f == "fn" => Some(name.clone()),
        _ => None,
    });
    let Some(fn_ident) = fn_ident else {
        return quote!(#errors #kept);
    };
    let vis = match rest {
        [TokenTree::Ident(p), TokenTree::Group(g), ..]
            if p == "pub" && g.delimiter() == Delimiter::Parenthesis =>
        {
            quote!(#p #g)
        }
        [TokenTree::Ident(p), ..] if p == "pub" => quote!(#p),
        _ => TokenStream::new(),
    };
    let location = location::of(fn_ident.span());
    let krate = std::env::var("CARGO_CRATE_NAME").unwrap_or_default();
    let descriptor = Descriptor {
        path: TokenStream::new(),
        kind,
        fn_ident: fn_ident.clone(),
        name: LitStr::new(&naming::unraw(&fn_ident), fn_ident.span()),
        aliases: Vec::new(),
        qualifiers: Vec::new(),
        primary: false,
        fallback: false,
        order: 0,
        is_async: false,
        form: signature::Form::Plain,
        output: quote!(()),
        key: String::new(),
        keyed: None,
        params: Vec::new(),
        location,
        krate,
        poisoned: true,
    };
    let export = export_name("bean", &descriptor.krate, &fn_ident, &descriptor.location);
    let fields = descriptor.fields();
    let me = crate::transport::chain::me();
    let chain =
        crate::transport::chain::descriptor_macro(&export, &quote!({ path = { #me } #fields }));
    quote! {
        #errors
        #kept

        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code, missing_docs, unreachable_pub)]
        #vis mod #fn_ident {}

        #chain

        #[doc(hidden)]
        #[allow(unused_imports, unreachable_pub)]
        #vis use #export as #fn_ident;
    }
}

fn consume_fn_attrs(
    kind: BeanKind,
    attrs: Vec<Attribute>,
    meta: &mut BeanMeta,
    consumed: &mut Vec<syn::Path>,
    errors: &mut Errors,
) -> Vec<Attribute> {
    let mut kept = Vec::new();
    for attr in attrs {
        let name = args::attr_name(&attr).unwrap_or_default();
        if let Some(modifier) = Modifier::parse(&name) {
            if !is_moved(&attr) {
                consumed.push(attr.path().clone());
            }
            args::apply_modifier(modifier, &attr, meta, errors);
        } else if let Some(other) = BeanKind::parse(&name) {
            consumed.push(attr.path().clone());
            errors.at(
                Code::DuplicateAttribute,
                attr.path().span(),
                format!(
                    "a factory takes one bean attribute, but this one has `#[{}]` and `#[{}]`",
                    kind.as_str(),
                    other.as_str()
                ),
            );
        } else {
            kept.push(attr);
        }
    }
    kept
}

fn consume_param_attrs(
    function: &mut FactoryFn,
    consumed: &mut Vec<syn::Path>,
    errors: &mut Errors,
) -> Vec<Vec<LitStr>> {
    let mut all = Vec::new();
    for arg in &mut function.sig.inputs {
        let mut qualifiers = Vec::new();
        if let FnArg::Typed(pt) = arg {
            let mut kept = Vec::new();
            for a in std::mem::take(&mut pt.attrs) {
                match args::attr_name(&a).as_deref().and_then(Modifier::parse) {
                    Some(Modifier::Qualifier) => {
                        consumed.push(a.path().clone());
                        match args::parse_qualifier_attr(&a) {
                            Ok(lit) => qualifiers.push(lit),
                            Err(e) => errors.push(e),
                        }
                    }
                    Some(other) => errors.at(
                        Code::InvalidSyntax,
                        a.path().span(),
                        format!(
                            "`#[{}]` belongs on the factory, not on a parameter; parameters take only `#[qualifier(\"...\")]`",
                            other.as_str()
                        ),
                    ),
                    None => kept.push(a),
                }
            }
            pt.attrs = kept;
        }
        all.push(qualifiers);
    }
    all
}

/// The assertion that the output fits the attribute's contract.
fn output_check(
    kind: BeanKind,
    value: &syn::Type,
    krate: &CratePath,
    errors: &mut Errors,
) -> TokenStream {
    let span = value.span();
    let private = krate.private();
    match kind {
        BeanKind::Bean => quote_spanned! {span=>
            const _: () = #private::assert_bean_output::<#value>();
        },
        BeanKind::Tool => quote_spanned! {span=>
            const _: () = #private::assert_tool_output::<#value>();
        },
        BeanKind::ModelProvider => quote_spanned! {span=>
            const _: () = #private::assert_model_provider_output::<#value>();
        },
        BeanKind::Stage => {
            let is_arc_dyn = key::last_segment(value).is_some_and(|seg| {
                seg.ident == "Arc"
                    && matches!(key::type_args(seg).as_slice(), [syn::Type::TraitObject(t)] if t.dyn_token.is_some())
            });
            if !is_arc_dyn {
                errors.at(
                    Code::WrongOutput,
                    span,
                    format!(
                        "`#[stage]` factories must produce a trait object such as `Arc<dyn agent_core::stage::Stage<I, O>>` or `Arc<dyn YourStageTrait>`, but this one produces `{}`",
                        key::render(&signature::tokens(value))
                    ),
                );
                return TokenStream::new();
            }
            quote_spanned! {span=>
                const _: () = #private::assert_stage_output::<#value>();
            }
        }
    }
}

/// The first path segment of a modifier that moved itself below the bean attribute. The
/// bean attribute consumes it like any modifier but emits no `use` for its path, which
/// names no item: rustc already resolved the path the user wrote, and a fixed path such as
/// `::agent_core::primary` would not resolve where agent-core is renamed.
const MOVED: &str = "__agent_core_moved";

fn is_moved(attr: &Attribute) -> bool {
    let segments = &attr.path().segments;
    segments.len() == 2 && segments[0].ident == MOVED
}

/// Expands a modifier written above its bean attribute: it moves itself below, where the
/// bean attribute reads it, so attribute order never matters.
pub fn expand_modifier(modifier: Modifier, args: TokenStream, item: TokenStream) -> TokenStream {
    if nesting::too_deep(&args, Body::Scan).is_some()
        || nesting::too_deep(&item, Body::Skip).is_some()
    {
        return move_unparsed(modifier, args, item);
    }
    let Ok(mut function) = syn::parse2::<FactoryFn>(item.clone()) else {
        // Not a function: if a bean attribute follows, it reports that, once.
        return move_unparsed(modifier, args, item);
    };
    let has_bean_attr = function.attrs.iter().any(|a| {
        args::attr_name(a)
            .as_deref()
            .and_then(BeanKind::parse)
            .is_some()
    });
    if !has_bean_attr {
        return misplaced(modifier, quote!(#function));
    }
    let name = naming::fixed(modifier.as_str());
    let marker = naming::fixed(MOVED);
    let moved: Attribute = if args.is_empty() {
        syn::parse_quote!(#[#marker::#name])
    } else {
        syn::parse_quote!(#[#marker::#name(#args)])
    };
    function.attrs.push(moved);
    quote!(#function)
}

/// A modifier above an item too deeply nested to parse moves itself below the leading
/// attributes all the same, by tokens, if one of them is a bean attribute: that attribute
/// then reports the nesting, once. Otherwise the modifier is misplaced.
fn move_unparsed(modifier: Modifier, args: TokenStream, item: TokenStream) -> TokenStream {
    use proc_macro2::{Delimiter, TokenTree};
    let trees: Vec<TokenTree> = item.clone().into_iter().collect();
    let mut at = 0;
    let mut has_bean_attr = false;
    while let (Some(TokenTree::Punct(hash)), Some(TokenTree::Group(group))) =
        (trees.get(at), trees.get(at + 1))
    {
        if hash.as_char() != '#' || group.delimiter() != Delimiter::Bracket {
            break;
        }
        let last = group
            .stream()
            .into_iter()
            .take_while(|t| !matches!(t, TokenTree::Group(_)))
            .filter_map(|t| match t {
                TokenTree::Ident(i) => Some(i.to_string()),
                _ => None,
            })
            .last();
        has_bean_attr |= last.as_deref().and_then(BeanKind::parse).is_some();
        at += 2;
    }
    if !has_bean_attr {
        return misplaced(modifier, item);
    }
    let name = naming::fixed(modifier.as_str());
    let marker = naming::fixed(MOVED);
    let moved = if args.is_empty() {
        quote!(#[#marker::#name])
    } else {
        quote!(#[#marker::#name(#args)])
    };
    let (attrs, rest) = trees.split_at(at);
    quote!(#(#attrs)* #moved #(#rest)*)
}

/// The name of an item and its span, for messages about attributes placed on it.
fn item_name(item: &TokenStream) -> (String, Span) {
    if nesting::too_deep(item, Body::Scan).is_some() {
        // Too deep for `syn` to parse without risking the stack.
        let span = item
            .clone()
            .into_iter()
            .next()
            .map_or_else(Span::call_site, |t| t.span());
        return ("this item".to_owned(), span);
    }
    if item.is_empty() {
        return ("an empty item".to_owned(), Span::call_site());
    }
    match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Fn(f)) => (format!("function `{}`", f.sig.ident), f.sig.ident.span()),
        Ok(syn::Item::Struct(s)) => (format!("struct `{}`", s.ident), s.ident.span()),
        Ok(syn::Item::Enum(e)) => (format!("enum `{}`", e.ident), e.ident.span()),
        Ok(syn::Item::Union(u)) => (format!("union `{}`", u.ident), u.ident.span()),
        Ok(syn::Item::Impl(i)) => ("this `impl` block".to_owned(), i.impl_token.span),
        Ok(syn::Item::Trait(t)) => (format!("trait `{}`", t.ident), t.ident.span()),
        Ok(syn::Item::Const(c)) => (format!("constant `{}`", c.ident), c.ident.span()),
        Ok(syn::Item::Static(s)) => (format!("static `{}`", s.ident), s.ident.span()),
        Ok(syn::Item::Type(t)) => (format!("type alias `{}`", t.ident), t.ident.span()),
        Ok(syn::Item::Mod(m)) => (format!("module `{}`", m.ident), m.ident.span()),
        Ok(syn::Item::Use(u)) => ("this `use`".to_owned(), u.use_token.span),
        Ok(syn::Item::Macro(m)) => (
            "a macro call (attributes see the call, not what it expands to)".to_owned(),
            m.mac.path.span(),
        ),
        _ => match bodiless_fn(item) {
            Some(ident) => (format!("function `{ident}` without a body"), ident.span()),
            None => ("this item".to_owned(), Span::call_site()),
        },
    }
}

/// The name of a function written without a body (`fn f();`), which `syn` reads as
/// verbatim tokens.
fn bodiless_fn(item: &TokenStream) -> Option<syn::Ident> {
    use proc_macro2::TokenTree;
    let trees: Vec<TokenTree> = item.clone().into_iter().collect();
    let named = trees.windows(2).find_map(|pair| match pair {
        [TokenTree::Ident(f), TokenTree::Ident(name)] if f == "fn" => Some(name.clone()),
        _ => None,
    })?;
    let has_body = matches!(trees.last(), Some(TokenTree::Group(g)) if g.delimiter() == proc_macro2::Delimiter::Brace);
    (!has_body).then_some(named)
}

fn misplaced(modifier: Modifier, item: TokenStream) -> TokenStream {
    let (what, span) = item_name(&item);
    let err = diag::error(
        Code::UnsupportedFactory,
        span,
        format!(
            "`#[{}]` describes a bean, but {what} has no `#[bean]`, `#[tool]`, `#[stage]` or `#[model_provider]` attribute",
            modifier.as_str()
        ),
    )
    .to_compile_error();
    quote!(#err #item)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_names_are_stable_and_distinct() {
        let read = naming::fixed("read");
        let a = export_name("bean", "app", &read, "src/a.rs:1:1");
        assert_eq!(a, export_name("bean", "app", &read, "src/a.rs:1:1"));
        assert_ne!(a, export_name("bean", "app", &read, "src/b.rs:1:1"));
        assert_ne!(a, export_name("bean", "lib", &read, "src/a.rs:1:1"));
    }

    #[test]
    fn raw_function_names_make_valid_export_names() {
        let raw = syn::Ident::new_raw("type", Span::call_site());
        let name = export_name("set", "app", &raw, "src/a.rs:1:1").to_string();
        assert!(name.starts_with("__agent_core_set_app_type_"), "{name}");
    }

    #[test]
    fn modifier_above_moves_below() {
        let out = expand_modifier(
            Modifier::Order,
            quote!(10),
            quote!(
                #[tool]
                fn f() -> u8 {
                    1
                }
            ),
        );
        let text = out.to_string();
        assert!(
            text.find("tool").unwrap() < text.find("order").unwrap(),
            "{text}"
        );
    }

    #[test]
    fn modifier_without_bean_attribute_is_an_error() {
        let out = expand_modifier(
            Modifier::Primary,
            quote!(),
            quote!(
                fn f() -> u8 {
                    1
                }
            ),
        )
        .to_string();
        assert!(out.contains("[unsupported-factory]"), "{out}");
        assert!(out.contains("fn f"), "the item is kept: {out}");
    }

    #[test]
    fn a_body_is_kept_as_written_and_left_to_rustc() {
        // Not an expression: parsing the body would have called this "not a function".
        let out = expand(
            BeanKind::Bean,
            quote!(),
            quote!(
                /// Docs.
                pub fn f(x: u8) -> u16 {
                    #![allow(unused)]
                    let = ;
                }
            ),
        )
        .to_string();
        assert!(!out.contains("compile_error"), "{out}");
        assert!(
            out.contains("pub fn f (x : u8) -> u16 { # ! [allow (unused)] let = ; }"),
            "{out}"
        );
    }

    #[test]
    fn only_a_function_with_a_body_is_a_factory() {
        for item in [
            quote!(
                fn f() -> u8;
            ),
            quote!(fn f() -> u8 (1)),
            quote!(
                fn f() -> u8 {
                    1
                },
                extra
            ),
            quote!(
                struct S;
            ),
        ] {
            let out = expand(BeanKind::Bean, quote!(), item.clone()).to_string();
            assert!(out.contains("[not-a-function]"), "{item}: {out}");
        }
    }

    /// Every item that is not a complete function, under every bean attribute and with the
    /// typed-tool arguments that used to send the typed path back into expansion: one coded
    /// error, the item kept, and no recursion (these overflowed the stack before).
    #[test]
    fn no_item_that_is_not_a_function_recurses() {
        let items = [
            quote!(),
            quote!(
                pub struct Config;
            ),
            quote!(
                enum E {
                    A,
                }
            ),
            quote!(impl S {}),
            quote!(
                trait T {}
            ),
            // Braces: rustfmt would drop the attribute of a `fn` pointer's parameter.
            quote! { const F: fn(#[args] A) = f; },
            quote!(
                mod m {}
            ),
            quote!(m!();),
            quote!(
                fn f(#[args] a: A);
            ),
            quote!(fn f(#[args] a: A) -> u8),
        ];
        let arguments = [
            quote!(),
            quote!(effect = read_only, replay = safe),
            quote!(replay),
            quote!(effect),
            quote!(capabilities = ["filesystem.read"]),
        ];
        for kind in BeanKind::ALL {
            for args in &arguments {
                for item in &items {
                    let out = expand(kind, args.clone(), item.clone()).to_string();
                    assert_eq!(
                        out.matches("compile_error").count(),
                        1,
                        "#[{}({args})] {item}: {out}",
                        kind.as_str()
                    );
                    assert!(out.contains("[not-a-function]"), "{item}: {out}");
                    assert!(out.ends_with(&item.to_string()), "{item}: {out}");
                }
            }
        }
    }

    /// The other recursion: a typed tool nested past the bound. One coded error, the item
    /// kept without the attribute's own markers.
    #[test]
    fn a_typed_tool_nested_past_the_bound_is_one_error() {
        let depth = crate::nesting::MAX_DEPTH + 1;
        let src = format!(
            "fn f({}#[args] a: A{}) {{}}",
            "(".repeat(depth),
            ")".repeat(depth)
        );
        let out = std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(move || {
                let item: TokenStream = src.parse().unwrap();
                expand(BeanKind::Tool, quote!(effect), item).to_string()
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(out.matches("compile_error").count(), 1, "{out}");
        assert!(out.contains("[nesting-too-deep]"), "{out}");
    }

    #[test]
    fn a_modifier_above_a_bean_attribute_on_a_struct_lets_the_attribute_report() {
        let out = expand_modifier(
            Modifier::Primary,
            quote!(),
            quote!(
                #[bean]
                struct S;
            ),
        )
        .to_string();
        assert!(!out.contains("compile_error"), "{out}");
        let item: TokenStream = out.parse().unwrap();
        let out = expand(BeanKind::Bean, quote!(), without_first_attr(item)).to_string();
        assert_eq!(out.matches("compile_error").count(), 1, "{out}");
        assert!(out.contains("[not-a-function]"), "{out}");
        assert!(!out.contains("__agent_core_moved"), "{out}");
    }

    /// The item as a bean attribute sees it: its own `#[..]` removed.
    fn without_first_attr(item: TokenStream) -> TokenStream {
        item.into_iter().skip(2).collect()
    }
}
