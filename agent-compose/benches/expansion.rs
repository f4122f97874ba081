//! How long `compose!` itself takes: parsing every descriptor, resolving the graph and
//! generating the code, for synthetic graphs of 10 to 1000 beans shaped like the ones
//! `gen-graph` writes (single dependencies on earlier beans, plugins collected into `Vec` and
//! `BTreeMap` parameters, a qualified plugin, a fallback/normal/primary contract).
//!
//! The `attribute` group times one `#[bean]` expansion on factories of the same shapes, the
//! work rustc repeats for every annotated factory on every build of the crate.
//!
//! The `scale` group expands a bean set's finisher over 1,000 and 10,000 members, graphs of
//! 1,000 and 10,000 beans that each miss a dependency (an error list as long as the graph),
//! and the synthetic graph at 10,000 beans; `docs/performance.md` holds the figures.
//!
//! `cargo bench -p agent-compose --bench expansion` (`-- scale` for that group only)

use agent_compose::BeanKind;
use agent_compose::attr::signature::Form;
use agent_compose::key;
use agent_compose::transport::descriptor::{Descriptor, ParamDesc};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;
use std::hint::black_box;
use syn::LitStr;

fn lit(s: &str) -> LitStr {
    LitStr::new(s, Span::call_site())
}

fn param(name: &str, ty: &str, qualifiers: &[&str]) -> ParamDesc {
    let ty: syn::Type = syn::parse_str(ty).expect("type");
    let (shape, bean_ty) = key::shape_of(&ty);
    ParamDesc {
        name: Some(Ident::new(name, Span::call_site())),
        shape,
        key: key::of(&bean_ty),
        ty: quote!(#ty),
        bean_ty: quote!(#bean_ty),
        qualifiers: qualifiers.iter().map(|q| lit(q)).collect(),
    }
}

fn bean(index: usize, ty: &str, params: Vec<ParamDesc>) -> Descriptor {
    let ty: syn::Type = syn::parse_str(ty).expect("type");
    let name = format!("b{index}");
    Descriptor {
        path: syn::parse_str(&format!("m{}::{name}", index / 10)).expect("path"),
        kind: BeanKind::Bean,
        fn_ident: Ident::new(&name, Span::call_site()),
        name: lit(&name),
        aliases: Vec::new(),
        qualifiers: Vec::new(),
        primary: false,
        fallback: false,
        order: (index % 5) as i64,
        is_async: index % 9 == 3,
        form: [
            Form::Plain,
            Form::Result,
            Form::Managed,
            Form::ResultManaged,
        ][index % 4],
        output: quote!(#ty),
        key: key::of(&ty),
        keyed: None,
        params,
        location: format!("src/m{}.rs:{}:8", index / 10, index % 10 + 1),
        krate: "bench".into(),
        poisoned: false,
    }
}

/// The descriptors of an `n`-bean graph, as `compose_finish!` receives them.
fn graph(n: usize) -> TokenStream {
    let mut beans = Vec::with_capacity(n);
    let mut config = bean(0, "Arc<Config>", Vec::new());
    config.name = lit("config-default");
    config.fallback = true;
    beans.push(config);
    for i in 1..n {
        if i % 7 == 0 {
            let mut plugin = bean(i, "Arc<dyn Plugin>", Vec::new());
            if i == 7 {
                plugin.qualifiers.push(lit("selected"));
            }
            beans.push(plugin);
            continue;
        }
        let mut params = Vec::new();
        for back in [1, 3, 11].into_iter().take(i % 4) {
            if let Some(dep) = i.checked_sub(back).filter(|d| d % 7 != 0 && *d != 0) {
                params.push(param(&format!("p{back}"), &format!("Arc<T{dep}>"), &[]));
            }
        }
        if i % 10 == 5 {
            params.push(param("plugins", "Vec<Arc<dyn Plugin>>", &[]));
        }
        if i % 15 == 4 {
            params.push(param("named", "BTreeMap<String, Arc<dyn Plugin>>", &[]));
        }
        if i % 20 == 9 {
            params.push(param("config", "Arc<Config>", &[]));
        }
        if i % 25 == 12 && n > 7 {
            params.push(param("chosen", "Arc<dyn Plugin>", &["selected"]));
        }
        beans.push(bean(i, &format!("Arc<T{i}>"), params));
    }
    let items = beans.iter().map(|d| {
        let path = &d.path;
        let fields = d.fields();
        quote!({ path = { #path } #fields })
    });
    agent_compose::__testing::finisher_input(quote!(#(#items)*), quote!(pub struct App))
}

fn expansion(c: &mut Criterion) {
    let mut group = c.benchmark_group("expansion");
    for n in [10, 100, 500, 1000] {
        let input = graph(n);
        let output = agent_compose::__testing::finish(input.clone(), "bench").to_string();
        assert!(
            !output.contains("compile_error"),
            "the synthetic graph resolves: {output}"
        );
        group.bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| {
            b.iter(|| agent_compose::__testing::finish(black_box(input.clone()), "bench"));
        });
    }
    group.finish();
}

/// Factories shaped like the ones `gen-graph` writes: a plain one with one dependency, an
/// async managed one with three dependencies, and one taking a collection and a qualified
/// plugin.
const FACTORIES: [(&str, &str); 3] = [
    (
        "plain",
        "pub fn bean_32(t23: Arc<T23>) -> Arc<T32> {
            let value: Arc<T32> = Arc::new(T32(Node::new(32).dep(&t23.0)));
            value
        }",
    ),
    (
        "async_managed",
        "pub async fn bean_31(t16: Arc<T16>, t28: Arc<T28>, config: Arc<Config>) -> Result<Managed<Arc<T31>>, GenError> {
            fail_point(31)?;
            let value: Arc<T31> = Arc::new(T31(Node::new(31).dep(&t16.0).dep(&t28.0).config(&config)));
            Ok(Managed::new(value).with_cleanup(|| async {
                cleaned(31);
                Ok(())
            }))
        }",
    ),
    (
        "collections",
        "pub fn bean_34(by_name: BTreeMap<String, Arc<dyn Plugin>>, #[qualifier(\"selected\")] selected: Arc<dyn Plugin>) -> Managed<Arc<T34>> {
            let value: Arc<T34> = Arc::new(T34(Node::new(34).map(&by_name).selected(&*selected)));
            Managed::new(value).with_cleanup(|| async {
                cleaned(34);
                Ok(())
            })
        }",
    ),
];

fn attribute(c: &mut Criterion) {
    let mut group = c.benchmark_group("attribute");
    for (shape, source) in FACTORIES {
        let item: TokenStream = source.parse().expect("factory");
        let output =
            agent_compose::bean_attribute(BeanKind::Bean, TokenStream::new(), item.clone())
                .to_string();
        assert!(
            !output.contains("compile_error"),
            "the factory is accepted: {output}"
        );
        group.bench_with_input(BenchmarkId::from_parameter(shape), &item, |b, item| {
            b.iter(|| {
                agent_compose::bean_attribute(
                    BeanKind::Bean,
                    TokenStream::new(),
                    black_box(item.clone()),
                )
            });
        });
    }
    group.finish();
}

/// A bean set's finisher over `n` members, as `bean_set!` hands it to the finisher: one
/// descriptor per member, each reached by the member's own path.
fn set_finisher(n: usize) -> TokenStream {
    let descriptors = (0..n).map(|i| {
        let d = bean(i, &format!("Arc<T{i}>"), Vec::new());
        let path = &d.path;
        let fields = d.fields();
        quote!({ path = { #path } #fields })
    });
    let entries = (0..n).map(|i| {
        let d = bean(i, "u8", Vec::new());
        let path = &d.path;
        quote!({ #path })
    });
    agent_compose::__testing::finisher_input(
        quote!(#(#descriptors)*),
        quote!(@set __agent_core_set_bench [ #(#entries)* ]),
    )
}

/// `n` beans that each miss their one dependency: bean `i` produces `Arc<m::T{i}>` and asks
/// for `Arc<n::T{i}>`, so every error carries a "written differently" note naming bean `i`.
fn missing_dependencies(n: usize) -> TokenStream {
    let items = (0..n).map(|i| {
        let d = bean(
            i,
            &format!("Arc<m::T{i}>"),
            vec![param("dep", &format!("Arc<n::T{i}>"), &[])],
        );
        let path = &d.path;
        let fields = d.fields();
        quote!({ path = { #path } #fields })
    });
    agent_compose::__testing::finisher_input(quote!(#(#items)*), quote!(pub struct App))
}

/// Shapes at 1,000 and 10,000 entries: a bean set's finisher, a graph whose every bean
/// misses a dependency (an error list as long as the graph) and, at 10,000, the synthetic
/// graph of the `expansion` group. Flat sampling with ten samples: one iteration of the
/// largest shapes takes seconds on quadratic code.
fn scale(c: &mut Criterion) {
    let mut group = c.benchmark_group("scale");
    group.sample_size(10);
    group.sampling_mode(criterion::SamplingMode::Flat);
    type Shape = (
        &'static str,
        fn(usize) -> TokenStream,
        &'static [usize],
        bool,
    );
    let shapes: [Shape; 3] = [
        ("set", set_finisher, &[1000, 10_000], true),
        ("missing", missing_dependencies, &[1000, 10_000], false),
        ("graph", graph, &[10_000], true),
    ];
    for (shape, input_of, sizes, accepted) in shapes {
        for &n in sizes {
            let input = input_of(n);
            let output = agent_compose::__testing::finish(input.clone(), "bench").to_string();
            assert_eq!(
                !output.contains("compile_error"),
                accepted,
                "{shape}/{n}: {}",
                &output[..output.len().min(2000)]
            );
            group.bench_with_input(BenchmarkId::new(shape, n), &input, |b, input| {
                b.iter(|| agent_compose::__testing::finish(black_box(input.clone()), "bench"));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, expansion, attribute, scale);
criterion_main!(benches);
