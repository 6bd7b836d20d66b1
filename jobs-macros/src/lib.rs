//! The `#[job]` attribute. Use it through `jobs_core::job`, which re-exports it.
//!
//! `#[job]` goes on the `impl Job for T` block rather than on the struct: that block is where
//! the handler lives, so the job's options sit next to the code they govern, and one attribute
//! can both make the handler an async trait method and register the type.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::quote;
use syn::parse::Parser;
use syn::{parse_macro_input, Expr, ExprArray, ImplItem, ItemImpl, Lit, LitInt, LitStr, Path};

/// Marks `impl Job for T` as a job. See `jobs_core::job` for the options.
#[proc_macro_attribute]
pub fn job(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = parse_macro_input!(input as ItemImpl);
    let mut options = Options::default();
    let parser = syn::meta::parser(|meta| options.parse(meta));
    if let Err(err) = parser.parse(args) {
        return err.to_compile_error().into();
    }
    match expand(options, item) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    display_name: Option<LitStr>,
    laravel: Option<LitStr>,
    queue: Option<LitStr>,
    tries: Option<LitInt>,
    backoff: Option<Vec<LitInt>>,
    timeout: Option<LitInt>,
    fail_on_timeout: bool,
    unique_for: Option<LitInt>,
    unique_until: Option<LitStr>,
    retry_for: Option<LitInt>,
    max_exceptions: Option<LitInt>,
    debounce: Option<LitInt>,
    max_wait: Option<LitInt>,
    krate: Option<Path>,
}

impl Options {
    fn parse(&mut self, meta: syn::meta::ParseNestedMeta) -> syn::Result<()> {
        let key = meta
            .path
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        match key.as_str() {
            "name" => self.name = Some(meta.value()?.parse()?),
            "display_name" => self.display_name = Some(meta.value()?.parse()?),
            "laravel" => self.laravel = Some(meta.value()?.parse()?),
            "queue" => self.queue = Some(meta.value()?.parse()?),
            "tries" => self.tries = Some(meta.value()?.parse()?),
            "timeout" => self.timeout = Some(meta.value()?.parse()?),
            "retry_for" => self.retry_for = Some(meta.value()?.parse()?),
            "max_exceptions" => self.max_exceptions = Some(meta.value()?.parse()?),
            "debounce" => self.debounce = Some(meta.value()?.parse()?),
            "max_wait" => self.max_wait = Some(meta.value()?.parse()?),
            "unique_for" => {
                let seconds: LitInt = meta.value()?.parse()?;
                if seconds.base10_parse::<u64>()? == 0 {
                    return Err(syn::Error::new_spanned(
                        seconds,
                        "unique_for must be at least 1 second: a lock without an end can \
                         outlive a lost job",
                    ));
                }
                self.unique_for = Some(seconds);
            }
            "unique_until" => {
                let until: LitStr = meta.value()?.parse()?;
                if !matches!(until.value().as_str(), "done" | "processing") {
                    return Err(syn::Error::new_spanned(
                        until,
                        "unique_until is \"done\" or \"processing\"",
                    ));
                }
                self.unique_until = Some(until);
            }
            "backoff" => {
                let value: Expr = meta.value()?.parse()?;
                self.backoff = Some(backoff_list(&value)?);
            }
            "fail_on_timeout" => {
                self.fail_on_timeout = if meta.input.peek(syn::Token![=]) {
                    meta.value()?.parse::<syn::LitBool>()?.value
                } else {
                    true
                };
            }
            "crate" => {
                let path: LitStr = meta.value()?.parse()?;
                self.krate = Some(path.parse()?);
            }
            _ => {
                return Err(meta.error(
                    "unknown job option; expected one of name, display_name, queue, tries, \
                     backoff, timeout, fail_on_timeout, retry_for, max_exceptions, unique_for, \
                     unique_until, debounce, max_wait, laravel, crate",
                ))
            }
        }
        Ok(())
    }
}

/// `5` or `[1, 5, 10]`: whole seconds.
fn backoff_list(value: &Expr) -> syn::Result<Vec<LitInt>> {
    let int = |expr: &Expr| match expr {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(i), ..
        }) => Ok(i.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            "backoff takes whole seconds: 5 or [1, 5, 10]",
        )),
    };
    match value {
        Expr::Array(ExprArray { elems, .. }) => elems.iter().map(int).collect(),
        single => Ok(vec![int(single)?]),
    }
}

fn expand(options: Options, mut item: ItemImpl) -> syn::Result<proc_macro2::TokenStream> {
    let Some((_, trait_path, _)) = &item.trait_ else {
        return Err(syn::Error::new_spanned(
            &item.self_ty,
            "#[job] goes on an `impl Job for YourType` block",
        ));
    };
    if trait_path
        .segments
        .last()
        .map(|s| s.ident != "Job")
        .unwrap_or(true)
    {
        return Err(syn::Error::new_spanned(
            trait_path,
            "#[job] goes on an `impl Job for YourType` block",
        ));
    }
    if !item.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &item.generics,
            "#[job] does not support generic job types: each job type needs one registered name",
        ));
    }
    if let (Some(until), None) = (&options.unique_until, &options.unique_for) {
        return Err(syn::Error::new_spanned(
            until,
            "unique_until needs unique_for: how long the lock lasts at most",
        ));
    }
    if let (Some(debounce), Some(_)) = (&options.debounce, &options.unique_for) {
        return Err(syn::Error::new_spanned(
            debounce,
            "a job is either debounced or unique: debouncing already leaves one job per id",
        ));
    }
    if let (Some(max_wait), None) = (&options.max_wait, &options.debounce) {
        return Err(syn::Error::new_spanned(
            max_wait,
            "max_wait bounds a debounce: give debounce too",
        ));
    }
    let self_ty = item.self_ty.clone();
    let type_name = match &*self_ty {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    };
    let name = match (&options.name, type_name) {
        (Some(name), _) => name.clone(),
        (None, Some(type_name)) => LitStr::new(&type_name, Span::call_site()),
        (None, None) => {
            return Err(syn::Error::new_spanned(
                &self_ty,
                "give this job a name with #[job(name = \"...\")]",
            ))
        }
    };
    let krate = options
        .krate
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::jobs_core));

    let has = |items: &[ImplItem], wanted: &str| {
        items.iter().any(|i| match i {
            ImplItem::Const(c) => c.ident == wanted,
            ImplItem::Fn(f) => f.sig.ident == wanted,
            _ => false,
        })
    };
    if !has(&item.items, "NAME") {
        item.items
            .push(syn::parse_quote!(const NAME: &'static str = #name;));
    }
    let failed_hook = has(&item.items, "failed");
    if !has(&item.items, "options") {
        let some = |v: Option<proc_macro2::TokenStream>| match v {
            Some(v) => quote!(::core::option::Option::Some(#v)),
            None => quote!(::core::option::Option::None),
        };
        let queue = some(options.queue.as_ref().map(|q| quote!(#q)));
        let display_name = some(options.display_name.as_ref().map(|d| quote!(#d)));
        let laravel = some(options.laravel.as_ref().map(|l| quote!(#l)));
        let tries = some(options.tries.as_ref().map(|t| quote!(#t)));
        let timeout = some(options.timeout.as_ref().map(|t| quote!(#t)));
        let backoff = some(options.backoff.as_ref().map(|b| quote!(&[#(#b),*])));
        let fail_on_timeout = options.fail_on_timeout;
        let unique_for = some(options.unique_for.as_ref().map(|u| quote!(#u)));
        let retry_for = some(options.retry_for.as_ref().map(|r| quote!(#r)));
        let max_exceptions = some(options.max_exceptions.as_ref().map(|m| quote!(#m)));
        let debounce = some(options.debounce.as_ref().map(|d| quote!(#d)));
        let max_wait = some(options.max_wait.as_ref().map(|m| quote!(#m)));
        let unique_until = match options.unique_until.as_ref().map(LitStr::value).as_deref() {
            Some("processing") => quote!(#krate::UniqueUntil::Processing),
            _ => quote!(#krate::UniqueUntil::Done),
        };
        item.items.push(syn::parse_quote! {
            fn options() -> #krate::JobOptions {
                #krate::JobOptions {
                    queue: #queue,
                    tries: #tries,
                    backoff: #backoff,
                    timeout: #timeout,
                    fail_on_timeout: #fail_on_timeout,
                    display_name: #display_name,
                    laravel: #laravel,
                    retry_for: #retry_for,
                    max_exceptions: #max_exceptions,
                    debounce: #debounce,
                    max_wait: #max_wait,
                    unique_for: #unique_for,
                    unique_until: #unique_until,
                    failed_hook: #failed_hook,
                }
            }
        });
    }

    Ok(quote! {
        #[#krate::__private::async_trait]
        #item

        #krate::__private::inventory::submit! {
            #krate::JobRegistration::of::<#self_ty>()
        }

        impl #self_ty {
            /// Starts a dispatch of this job; await it (after any of `.delay()`, `.on_queue()`,
            /// ...) to push the job.
            #[allow(dead_code, unreachable_pub)]
            pub fn dispatch(self) -> #krate::PendingDispatch<Self> {
                #krate::PendingDispatch::new(self)
            }
        }
    })
}
