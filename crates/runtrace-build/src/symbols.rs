//! The names generated probes carry in a binary: symbols, sections and ELF
//! note fields, per backend.
//!
//! The generators write these names and `runtrace doctor`
//! (`runtrace-doctor`) looks for them in built binaries; both take them from
//! here, so a naming change cannot leave the doctor checking for names that
//! no build produces.
//!
//! ```
//! use runtrace_build::symbols;
//! assert_eq!(symbols::perf_probe_symbol("runtrace", "task_spawn"), "runtrace_task_spawn");
//! let tp = symbols::tracepoint_symbol("myapp", "done");
//! assert_eq!(tp, "lttng_ust_tracepoint_myapp___done");
//! let parsed = symbols::parse_tracepoint_symbol(&tp).unwrap();
//! assert_eq!((parsed.provider.as_str(), parsed.event.as_str()), ("myapp", "done"));
//! ```

/// The provider of runtrace's built-in events (`probes/events.toml`); a
/// catalog without a `provider` key is this one.
pub const RUNTRACE_PROVIDER: &str = "runtrace";

// --- USDT / SystemTap SDT -------------------------------------------------

/// The section holding one ELF note per SDT probe site.
pub const SDT_NOTE_SECTION: &str = ".note.stapsdt";
/// The owner name of SDT notes.
pub const SDT_NOTE_OWNER: &str = "stapsdt";
/// The note type of SDT v3 notes (pc, base, semaphore, then the provider,
/// name and argument strings).
pub const SDT_NOTE_TYPE: u32 = 3;
/// The section (and, prefixed with `_`, the symbol) whose link-time and
/// run-time addresses let tracers relocate SDT notes' addresses.
pub const SDT_BASE_SECTION: &str = ".stapsdt.base";
/// The section the SDT semaphores live in (writable, allocated
/// `PROGBITS`).
pub const SEMAPHORE_SECTION: &str = ".probes";

/// The symbol of an event's USDT semaphore (one per `provider:event`,
/// shared by every site in the binary).
///
/// ```
/// assert_eq!(
///     runtrace_build::symbols::usdt_semaphore_symbol("myapp", "done"),
///     "__runtrace_sema_myapp_done"
/// );
/// ```
pub fn usdt_semaphore_symbol(provider: &str, event: &str) -> String {
    format!("__runtrace_sema_{provider}_{event}")
}

// --- perf-probe functions -------------------------------------------------

/// The symbol of an event's perf-probe function (`#[no_mangle]`, so
/// `perf probe -x BIN 'runtrace:EVENT=SYMBOL ...'` finds it).
///
/// ```
/// assert_eq!(runtrace_build::symbols::perf_probe_symbol("myapp", "done"), "myapp_done");
/// ```
pub fn perf_probe_symbol(provider: &str, event: &str) -> String {
    format!("{provider}_{event}")
}

// --- LTTng-UST ------------------------------------------------------------

/// LTTng-UST 2.13's prefix of a tracepoint's `struct lttng_ust_tracepoint`
/// symbol (`<prefix><provider>___<event>`).
pub const TRACEPOINT_PREFIX: &str = "lttng_ust_tracepoint_";
/// LTTng-UST 2.12 and older's prefix of the same symbol.
pub const LEGACY_TRACEPOINT_PREFIX: &str = "__tracepoint_";
/// LTTng-UST 2.13's prefix of a tracepoint's pointer symbol (after
/// [`TRACEPOINT_PREFIX`]: `lttng_ust_tracepoint_ptr_<provider>___<event>`).
pub const TRACEPOINT_PTR_PREFIX: &str = "lttng_ust_tracepoint_ptr_";
/// LTTng-UST 2.13's prefix of a provider's symbol.
pub const TRACEPOINT_PROVIDER_PREFIX: &str = "lttng_ust_tracepoint_provider_";
/// Between provider and event in tracepoint symbols.
pub const TRACEPOINT_SEPARATOR: &str = "___";
/// LTTng-UST 2.13's section of tracepoint pointers, registered through
/// `__start_`/`__stop_` symbols (so `--gc-sections` may drop it).
pub const TRACEPOINT_PTRS_SECTION: &str = "lttng_ust_tracepoints_ptrs";
/// LTTng-UST 2.12 and older's section of tracepoint pointers.
pub const LEGACY_TRACEPOINT_PTRS_SECTION: &str = "__tracepoints_ptrs";

/// The symbol of an event's `struct lttng_ust_tracepoint`.
///
/// ```
/// assert_eq!(
///     runtrace_build::symbols::tracepoint_symbol("runtrace", "task_spawn"),
///     "lttng_ust_tracepoint_runtrace___task_spawn"
/// );
/// ```
pub fn tracepoint_symbol(provider: &str, event: &str) -> String {
    format!("{TRACEPOINT_PREFIX}{provider}{TRACEPOINT_SEPARATOR}{event}")
}

/// The symbol of an event's tracepoint pointer (section
/// [`TRACEPOINT_PTRS_SECTION`]; `static` in the generated C).
///
/// ```
/// assert_eq!(
///     runtrace_build::symbols::tracepoint_ptr_symbol("myapp", "done"),
///     "lttng_ust_tracepoint_ptr_myapp___done"
/// );
/// ```
pub fn tracepoint_ptr_symbol(provider: &str, event: &str) -> String {
    format!("{TRACEPOINT_PTR_PREFIX}{provider}{TRACEPOINT_SEPARATOR}{event}")
}

/// The symbol of a provider's `struct lttng_ust_probe_desc` holder, which
/// a binary has when the provider is linked in.
///
/// ```
/// assert_eq!(
///     runtrace_build::symbols::tracepoint_provider_symbol("runtrace"),
///     "lttng_ust_tracepoint_provider_runtrace"
/// );
/// ```
pub fn tracepoint_provider_symbol(provider: &str) -> String {
    format!("{TRACEPOINT_PROVIDER_PREFIX}{provider}")
}

/// The symbol of an event's C wrapper, called from Rust when enabled.
///
/// ```
/// assert_eq!(
///     runtrace_build::symbols::lttng_wrapper_symbol("myapp", "done"),
///     "runtrace_lttng_myapp_done"
/// );
/// ```
pub fn lttng_wrapper_symbol(provider: &str, event: &str) -> String {
    format!("runtrace_lttng_{provider}_{event}")
}

/// The name of the static library holding a provider's LTTng-UST code.
///
/// ```
/// assert_eq!(runtrace_build::symbols::lttng_lib_name("myapp"), "runtrace_lttng_myapp");
/// ```
pub fn lttng_lib_name(provider: &str) -> String {
    format!("runtrace_lttng_{provider}")
}

/// A tracepoint symbol split into its parts (see
/// [`parse_tracepoint_symbol`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracepointSymbol {
    /// The provider.
    pub provider: String,
    /// The event.
    pub event: String,
    /// The LTTng-UST naming it follows: `"2.13"` or `"2.12"` (and older).
    pub abi: &'static str,
}

/// The provider and event of a tracepoint's `struct lttng_ust_tracepoint`
/// symbol, in either LTTng-UST naming; `None` for anything else (pointer
/// and provider symbols included).
///
/// ```
/// use runtrace_build::symbols::parse_tracepoint_symbol;
/// let t = parse_tracepoint_symbol("__tracepoint_myapp___done").unwrap();
/// assert_eq!((t.provider.as_str(), t.event.as_str(), t.abi), ("myapp", "done", "2.12"));
/// assert!(parse_tracepoint_symbol("lttng_ust_tracepoint_ptr_myapp___done").is_none());
/// assert!(parse_tracepoint_symbol("lttng_ust_tracepoint_provider_myapp").is_none());
/// ```
pub fn parse_tracepoint_symbol(name: &str) -> Option<TracepointSymbol> {
    if name.starts_with(TRACEPOINT_PROVIDER_PREFIX) || name.starts_with(TRACEPOINT_PTR_PREFIX) {
        return None;
    }
    let (rest, abi) = if let Some(rest) = name.strip_prefix(TRACEPOINT_PREFIX) {
        (rest, "2.13")
    } else {
        (name.strip_prefix(LEGACY_TRACEPOINT_PREFIX)?, "2.12")
    };
    // 2.12's pointer symbols are `__tracepoint_ptr_...`.
    if rest.starts_with("ptr_") {
        return None;
    }
    let (provider, event) = rest.split_once(TRACEPOINT_SEPARATOR)?;
    (!provider.is_empty() && !event.is_empty()).then(|| TracepointSymbol {
        provider: provider.to_string(),
        event: event.to_string(),
        abi,
    })
}
