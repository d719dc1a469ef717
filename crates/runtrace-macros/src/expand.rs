//! The function the attribute writes: the body as a future, run by
//! `runtrace::__entry::Entry` with the attribute's settings.

use crate::parse::{self, Flavor};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ItemFn;

/// `#[runtrace::main]` (`test == false`) or `#[runtrace::test]`.
pub(crate) fn entry(args: TokenStream, item: TokenStream, test: bool) -> TokenStream {
    let mut f: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => return with_error(item, e),
    };
    if f.sig.asyncness.is_none() {
        let e = syn::Error::new_spanned(
            f.sig.fn_token,
            "the function needs to be `async`: the attribute runs it on a tokio runtime",
        );
        return with_error(item, e);
    }
    if !test && f.sig.ident != "main" {
        let e = syn::Error::new_spanned(
            &f.sig.ident,
            "#[runtrace::main] goes on `async fn main`; use #[runtrace::test] for tests",
        );
        return with_error(item, e);
    }
    let c = match parse::config(args) {
        Ok(c) => c,
        Err(e) => return with_error(item, e),
    };
    f.sig.asyncness = None;
    let body = &f.block;
    let default = if test {
        Flavor::CurrentThread
    } else {
        Flavor::MultiThread
    };
    let flavor = match c.flavor.map_or(default, |f| f.0) {
        Flavor::MultiThread => quote!(::runtrace::__entry::Flavor::MultiThread),
        Flavor::CurrentThread => quote!(::runtrace::__entry::Flavor::CurrentThread),
    };
    let mut calls = Vec::new();
    if let Some((n, span)) = &c.worker_threads {
        if c.flavor.is_some_and(|f| f.0 == Flavor::CurrentThread) || (test && c.flavor.is_none()) {
            return with_error(
                item,
                syn::Error::new(*span, "`worker_threads` needs `flavor = \"multi_thread\"`"),
            );
        }
        calls.push(quote_spanned!(*span=> .worker_threads(#n)));
    }
    if let Some((b, span)) = c.start_paused {
        calls.push(quote_spanned!(span=> .start_paused(#b)));
    }
    if let Some(p) = &c.path {
        calls.push(quote!(.path(#p)));
    }
    if let Some(hz) = &c.cpu_hz {
        calls.push(quote!(.cpu_hz(#hz)));
    }
    if let Some(n) = &c.name {
        calls.push(quote!(.name(#n)));
    }
    if let Some(cfg) = &c.config {
        calls.push(quote!(.config(#cfg)));
    }
    let test_attr = if test {
        quote!(#[::core::prelude::v1::test])
    } else {
        quote!()
    };
    let name = f.sig.ident.to_string();
    let run = if test { quote!(.test(#name)) } else { quote!() };
    let attrs = &f.attrs;
    let vis = &f.vis;
    let sig = &f.sig;
    quote! {
        #test_attr
        #(#attrs)*
        #vis #sig {
            let body = async move #body;
            ::runtrace::__entry::Entry::new(#flavor)
                #(#calls)*
                #run
                .block_on(body)
        }
    }
}

/// The error, and the item made harmless beside it: not `async`, its body
/// `unreachable!()`, so the compiler reports the attribute's error alone
/// and not a cascade (an `async fn main`, `.await` outside async).
fn with_error(item: TokenStream, e: syn::Error) -> TokenStream {
    let err = e.to_compile_error();
    match syn::parse2::<ItemFn>(item.clone()) {
        Ok(mut f) => {
            f.sig.asyncness = None;
            f.block = syn::parse_quote!({ ::core::unreachable!() });
            quote!(#err #f)
        }
        Err(_) => quote!(#err #item),
    }
}
