//! The `#[job]` attribute. Use it through `redjob::job`, which re-exports it.
//!
//! `#[job]` goes on the `impl Job for T` block rather than on the struct: that block is where
//! the handler lives, so the job's options sit next to the code they govern, and one attribute
//! can both make the handler an async trait method and register the type.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::quote;
use syn::parse::Parser;
use syn::{parse_macro_input, Expr, ExprArray, ImplItem, ItemImpl, Lit, LitInt, LitStr, Path};

/// Marks `impl Job for T` as a job. See `redjob::job` for the options, among them
/// `crate = "path"`: the path the generated code names `redjob` by (`::redjob` unless given),
/// for a dependency renamed in `Cargo.toml` or reached through another crate's re-export, as
/// serde's `#[serde(crate = "...")]`.
#[proc_macro_attribute]
pub fn job(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = parse_macro_input!(input as ItemImpl);
    let options = match Options::from_args(args) {
        Ok(options) => options,
        Err(err) => return err.to_compile_error().into(),
    };
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
    state: Vec<syn::Type>,
    trace: Option<LitStr>,
    track: bool,
    result_ttl: Option<LitInt>,
    resumable: bool,
    krate: Option<Path>,
}

impl Options {
    fn from_args(args: TokenStream) -> syn::Result<Self> {
        let mut options = Options::default();
        syn::meta::parser(|meta| options.parse(meta)).parse(args)?;
        Ok(options)
    }

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
            "unique_for" => self.unique_for = Some(unique_for(meta.value()?.parse()?)?),
            "unique_until" => self.unique_until = Some(unique_until(meta.value()?.parse()?)?),
            "backoff" => self.backoff = Some(backoff_list(&meta.value()?.parse()?)?),
            "fail_on_timeout" => self.fail_on_timeout = flag(&meta)?,
            "state" => self.state.push(meta.value()?.parse()?),
            "trace" => self.trace = Some(trace_mode(meta.value()?.parse()?)?),
            "track" => self.track = flag(&meta)?,
            "resumable" => self.resumable = flag(&meta)?,
            "result_ttl" => self.result_ttl = Some(meta.value()?.parse()?),
            "crate" => {
                let path: LitStr = meta.value()?.parse()?;
                self.krate = Some(path.parse()?);
            }
            _ => {
                return Err(meta.error(
                    "unknown job option; expected one of name, display_name, queue, tries, \
                     backoff, timeout, fail_on_timeout, retry_for, max_exceptions, unique_for, \
                     unique_until, debounce, max_wait, laravel, state, trace, track, result_ttl, \
                     resumable, crate",
                ))
            }
        }
        Ok(())
    }

    /// Options that only mean something together, or that contradict each other.
    fn check_combinations(&self) -> syn::Result<()> {
        if let (Some(until), None) = (&self.unique_until, &self.unique_for) {
            return Err(syn::Error::new_spanned(
                until,
                "unique_until needs unique_for: how long the lock lasts at most",
            ));
        }
        if let (Some(debounce), Some(_)) = (&self.debounce, &self.unique_for) {
            return Err(syn::Error::new_spanned(
                debounce,
                "a job is either debounced or unique: debouncing already leaves one job per id",
            ));
        }
        if let (Some(ttl), false) = (&self.result_ttl, self.track) {
            return Err(syn::Error::new_spanned(
                ttl,
                "result_ttl says how long a tracked job's outcome is kept: give track too",
            ));
        }
        if let (Some(max_wait), None) = (&self.max_wait, &self.debounce) {
            return Err(syn::Error::new_spanned(
                max_wait,
                "max_wait bounds a debounce: give debounce too",
            ));
        }
        Ok(())
    }
}

fn unique_for(seconds: LitInt) -> syn::Result<LitInt> {
    if seconds.base10_parse::<u64>()? == 0 {
        return Err(syn::Error::new_spanned(
            seconds,
            "unique_for must be at least 1 second: a lock without an end can outlive a lost job",
        ));
    }
    Ok(seconds)
}

fn unique_until(until: LitStr) -> syn::Result<LitStr> {
    if !matches!(until.value().as_str(), "done" | "processing") {
        return Err(syn::Error::new_spanned(
            until,
            "unique_until is \"done\" or \"processing\"",
        ));
    }
    Ok(until)
}

fn trace_mode(mode: LitStr) -> syn::Result<LitStr> {
    if !matches!(mode.value().as_str(), "child" | "link" | "ignore") {
        return Err(syn::Error::new_spanned(
            mode,
            "trace is \"child\", \"link\" or \"ignore\"",
        ));
    }
    Ok(mode)
}

/// `fail_on_timeout` alone means `fail_on_timeout = true`.
fn flag(meta: &syn::meta::ParseNestedMeta) -> syn::Result<bool> {
    if meta.input.peek(syn::Token![=]) {
        Ok(meta.value()?.parse::<syn::LitBool>()?.value)
    } else {
        Ok(true)
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
    check_impl_block(&item)?;
    options.check_combinations()?;
    let self_ty = item.self_ty.clone();
    let name = job_name(&options, &self_ty)?;
    let krate = options
        .krate
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::redjob));

    if !has_item(&item.items, "Output") {
        item.items.push(syn::parse_quote!(
            type Output = ();
        ));
    }
    if !has_item(&item.items, "NAME") {
        item.items
            .push(syn::parse_quote!(const NAME: &'static str = #name;));
    }
    if !options.state.is_empty() && !has_item(&item.items, "STATE") {
        let state = &options.state;
        item.items.push(syn::parse_quote! {
            const STATE: &'static [#krate::StateType] = &[#(#krate::StateType::of::<#state>()),*];
        });
    }
    let failed_hook = has_item(&item.items, "failed");
    if !has_item(&item.items, "options") {
        item.items.push(options_fn(&options, &krate, failed_hook));
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

/// The attribute registers the type under one name, so it only fits a non-generic
/// `impl Job for T`.
fn check_impl_block(item: &ItemImpl) -> syn::Result<()> {
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
    Ok(())
}

/// The `name` option, or else the type's own name.
fn job_name(options: &Options, self_ty: &syn::Type) -> syn::Result<LitStr> {
    let type_name = match self_ty {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    };
    match (&options.name, type_name) {
        (Some(name), _) => Ok(name.clone()),
        (None, Some(type_name)) => Ok(LitStr::new(&type_name, Span::call_site())),
        (None, None) => Err(syn::Error::new_spanned(
            self_ty,
            "give this job a name with #[job(name = \"...\")]",
        )),
    }
}

/// Whether the impl block already writes this constant or method itself, which wins over the
/// attribute.
fn has_item(items: &[ImplItem], wanted: &str) -> bool {
    items.iter().any(|i| match i {
        ImplItem::Const(c) => c.ident == wanted,
        ImplItem::Fn(f) => f.sig.ident == wanted,
        ImplItem::Type(t) => t.ident == wanted,
        _ => false,
    })
}

/// `fn options() -> JobOptions` built from the attribute's options.
fn options_fn(options: &Options, krate: &Path, failed_hook: bool) -> ImplItem {
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
    let resumable = options.resumable;
    let unique_for = some(options.unique_for.as_ref().map(|u| quote!(#u)));
    let retry_for = some(options.retry_for.as_ref().map(|r| quote!(#r)));
    let max_exceptions = some(options.max_exceptions.as_ref().map(|m| quote!(#m)));
    let debounce = some(options.debounce.as_ref().map(|d| quote!(#d)));
    let max_wait = some(options.max_wait.as_ref().map(|m| quote!(#m)));
    let unique_until = match options.unique_until.as_ref().map(LitStr::value).as_deref() {
        Some("processing") => quote!(#krate::UniqueUntil::Processing),
        _ => quote!(#krate::UniqueUntil::Done),
    };
    let trace = some(
        options
            .trace
            .as_ref()
            .map(|mode| match mode.value().as_str() {
                "link" => quote!(#krate::trace::TraceMode::Link),
                "ignore" => quote!(#krate::trace::TraceMode::Ignore),
                _ => quote!(#krate::trace::TraceMode::Child),
            }),
    );
    let track = match (options.track, &options.result_ttl) {
        (false, _) => quote!(::core::option::Option::None),
        (true, Some(ttl)) => quote!(::core::option::Option::Some(#ttl)),
        (true, None) => quote!(::core::option::Option::Some(#krate::status::DEFAULT_RESULT_TTL)),
    };
    syn::parse_quote! {
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
                trace: #trace,
                track: #track,
                resumable: #resumable,
                failed_hook: #failed_hook,
            }
        }
    }
}
