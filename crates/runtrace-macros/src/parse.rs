//! The attribute's arguments into a [`Config`]: one error per unknown or
//! repeated key, spanned at the key.

use proc_macro2::Span;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Lit, Meta, Path, Token};

/// The runtime's flavor.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    MultiThread,
    CurrentThread,
}

/// Everything the attribute says.
pub(crate) struct Config {
    pub flavor: Option<(Flavor, Span)>,
    pub worker_threads: Option<(Expr, Span)>,
    pub start_paused: Option<(bool, Span)>,
    pub path: Option<Expr>,
    pub cpu_hz: Option<Expr>,
    pub name: Option<Expr>,
    pub config: Option<Path>,
}

impl Config {
    fn new() -> Config {
        Config {
            flavor: None,
            worker_threads: None,
            start_paused: None,
            path: None,
            cpu_hz: None,
            name: None,
            config: None,
        }
    }
}

fn repeated(key: &syn::Path) -> syn::Error {
    syn::Error::new_spanned(key, format!("`{}` is given twice", key_name(key)))
}

fn key_name(p: &syn::Path) -> String {
    p.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

fn str_lit(e: &Expr, what: &str) -> syn::Result<String> {
    match e {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.value()),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{what}` takes a string, like \"multi_thread\""),
        )),
    }
}

fn bool_lit(e: &Expr, what: &str) -> syn::Result<bool> {
    match e {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => Ok(b.value),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{what}` takes `true` or `false`"),
        )),
    }
}

/// Parses the attribute's arguments, collecting every error.
pub(crate) fn config(args: proc_macro2::TokenStream) -> Result<Config, syn::Error> {
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(args)?;
    let mut c = Config::new();
    let mut errors: Option<syn::Error> = None;
    let mut fail = |e: syn::Error| match &mut errors {
        Some(all) => all.combine(e),
        None => errors = Some(e),
    };
    for meta in metas {
        let key = meta.path().clone();
        let span = syn::spanned::Spanned::span(&key);
        match (key_name(&key).as_str(), &meta) {
            ("flavor", Meta::NameValue(nv)) => match str_lit(&nv.value, "flavor") {
                Ok(s) => {
                    let f = match s.as_str() {
                        "multi_thread" => Flavor::MultiThread,
                        "current_thread" => Flavor::CurrentThread,
                        other => {
                            fail(syn::Error::new_spanned(
                                &nv.value,
                                format!("unknown flavor {other:?}: \"multi_thread\" or \"current_thread\""),
                            ));
                            continue;
                        }
                    };
                    if c.flavor.replace((f, span)).is_some() {
                        fail(repeated(&key));
                    }
                }
                Err(e) => fail(e),
            },
            ("worker_threads", Meta::NameValue(nv)) => {
                if c.worker_threads.replace((nv.value.clone(), span)).is_some() {
                    fail(repeated(&key));
                }
            }
            ("start_paused", Meta::NameValue(nv)) => match bool_lit(&nv.value, "start_paused") {
                Ok(b) => {
                    if c.start_paused.replace((b, span)).is_some() {
                        fail(repeated(&key));
                    }
                }
                Err(e) => fail(e),
            },
            ("crate", Meta::NameValue(_)) => fail(syn::Error::new_spanned(
                &key,
                "`crate` is tokio's; runtrace's attributes take the runtime from the runtrace crate",
            )),
            ("runtrace", Meta::List(list)) => {
                match list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated) {
                    Ok(inner) => {
                        for m in inner {
                            if let Err(e) = runtrace_arg(&mut c, &m) {
                                fail(e);
                            }
                        }
                    }
                    Err(e) => fail(e),
                }
            }
            (name, _) => fail(syn::Error::new_spanned(
                &key,
                format!(
                    "unknown argument `{name}`: tokio's are flavor, worker_threads and start_paused (as `key = value`); runtrace's go in `runtrace(path = \"...\", cpu_hz = 99, name = \"...\", config = my_fn)`"
                ),
            )),
        }
    }
    match errors {
        Some(e) => Err(e),
        None => Ok(c),
    }
}

/// One argument inside `runtrace(...)`.
fn runtrace_arg(c: &mut Config, m: &Meta) -> syn::Result<()> {
    let key = m.path();
    let Meta::NameValue(nv) = m else {
        return Err(syn::Error::new_spanned(
            key,
            format!(
                "`{}` takes a value: `{} = ...`",
                key_name(key),
                key_name(key)
            ),
        ));
    };
    let slot = match key_name(key).as_str() {
        "path" => &mut c.path,
        "cpu_hz" => &mut c.cpu_hz,
        "name" => &mut c.name,
        "config" => {
            let Expr::Path(p) = &nv.value else {
                return Err(syn::Error::new_spanned(
                    &nv.value,
                    "`config` takes a function's path: `fn(RecorderBuilder) -> RecorderBuilder`",
                ));
            };
            if c.config.replace(p.path.clone()).is_some() {
                return Err(repeated(key));
            }
            return Ok(());
        }
        other => {
            return Err(syn::Error::new_spanned(
                key,
                format!("unknown runtrace setting `{other}`: path, cpu_hz, name or config"),
            ))
        }
    };
    if slot.replace(nv.value.clone()).is_some() {
        return Err(repeated(key));
    }
    Ok(())
}
