//! The static manifest of a composed graph: every bean, every selection and the
//! construction order.

use super::lit;
use crate::graph::Resolution;
use crate::key::{self, ParamShape};
use crate::transport::compose::Header;
use crate::transport::descriptor::Descriptor;
use proc_macro2::TokenStream;
use quote::quote;
use std::collections::BTreeMap;
use syn::Ident;

/// The body of the generated `manifest()`: a `static` and a reference to it.
pub fn manifest(header: &Header, beans: &[Descriptor], resolution: &Resolution) -> TokenStream {
    let app = lit(&header.name.to_string());
    let compose = header.krate.compose();
    let compose = &compose;
    let entries = beans.iter().map(|b| {
        let name = lit(&b.name.value());
        let aliases = b.aliases.iter().map(|a| lit(&a.value()));
        let qualifiers = b.qualifiers.iter().map(|q| lit(&q.value()));
        let (primary, fallback, order) = (b.primary, b.fallback, b.order);
        let kind = b.kind.runtime_variant();
        let output = lit(&key::render(&b.output));
        let factory = lit(&b.label());
        let location = lit(&b.location);
        quote! {
            #compose::ManifestBean {
                name: #name,
                aliases: &[#(#aliases),*],
                qualifiers: &[#(#qualifiers),*],
                primary: #primary,
                fallback: #fallback,
                order: #order,
                kind: #compose::BeanKind::#kind,
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
            let shape = crate::naming::fixed(match p.shape {
                ParamShape::Single => "Single",
                ParamShape::Optional => "Optional",
                ParamShape::List => "List",
                ParamShape::Map => "Map",
            });
            let ty = lit(&key::render(&p.ty));
            let members = binding.members();
            let chosen = if members.len() < 2 {
                let names = members.iter().map(|&j| lit(&beans[j].name.value()));
                quote!(&[#(#names),*])
            } else {
                let next = lists.len();
                let list = lists.entry(members).or_insert_with_key(|members| {
                    let name = crate::naming::Name::new("__CHOSEN_")
                        .number(next)
                        .call_site();
                    let names = members.iter().map(|&j| lit(&beans[j].name.value()));
                    list_items.push(quote!(const #name: &[&str] = &[#(#names),*];));
                    name
                });
                quote!(#list)
            };
            quote! {
                #compose::ManifestSelection {
                    consumer: #consumer,
                    parameter: #parameter,
                    position: #position,
                    shape: #compose::InjectionShape::#shape,
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
        static MANIFEST: #compose::Manifest = #compose::Manifest {
            app: #app,
            beans: &[#(#entries),*],
            selections: &[#(#selections),*],
            order: &[#(#order),*],
        };
        &MANIFEST
    }
}
