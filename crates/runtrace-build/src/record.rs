//! The recorder backend: built-in events call the recorder's generated
//! per-event functions; application events register their schema on first
//! use and encode their fields inline through the recorder's generic
//! `emit`.
//!
//! ```
//! let cat = runtrace_build::Catalog::parse(
//!     "provider = \"myapp\"\n[[event]]\nname = \"done\"\ndoc = \"\"\nfields = []\n",
//! )
//! .unwrap();
//! let fire = runtrace_build::record::rust_fire(&cat, &cat.events[0]);
//! assert!(fire.contains("__rt::UserEventDef::new(\"myapp\", \"done\""));
//! ```

use crate::catalog::{Catalog, Event};
use crate::fields::{self, field_variant};
use crate::symbols::RUNTRACE_PROVIDER;

/// The statements recording one event (when a recording is on).
pub fn rust_fire(cat: &Catalog, ev: &Event) -> String {
    let names: Vec<&str> = ev.fields.iter().map(|f| f.name.as_str()).collect();
    if cat.provider == RUNTRACE_PROVIDER {
        let args = names.join(", ");
        let name = &ev.name;
        return format!(
            "        match ticks {{\n            \
             Some(t) => __rt::recorder::events::at::{name}(t, {args}),\n            \
             None => __rt::recorder::events::{name}({args}),\n        }}\n"
        );
    }
    // Application events: registered on first use, encoded inline
    // through bounds-checked slices (`emit` gives the encoder `max`
    // bytes), every field by its type's wire encoding.
    let fields: Vec<String> = ev
        .fields
        .iter()
        .map(|f| format!("({:?}, __rt::FieldType::{})", f.name, field_variant(&f.ty)))
        .collect();
    let max: usize = ev.fields.iter().map(fields::max_len).sum();
    let enc: String = ev
        .fields
        .iter()
        .map(|f| {
            format!(
                "                {}\n",
                fields::encode(f, "__rt::wire", "sink", "_reg")
            )
        })
        .collect();
    format!(
        "        if __rt::recorder::is_recording() {{\n            \
         static DEF: __rt::UserEventDef = __rt::UserEventDef::new({prov:?}, {name:?}, &[{fields}]);\n            \
         let enc = |sink: &mut __rt::wire::SliceSink<'_>, _reg: &mut u64| {{\n\
         {enc}            }};\n            \
         match ticks {{\n                \
         Some(t) => __rt::recorder::emit_at(t, DEF.id(), {max}, None, enc),\n                \
         None => __rt::recorder::emit(DEF.id(), {max}, None, enc),\n            }}\n        }}\n",
        prov = cat.provider,
        name = ev.name,
        fields = fields.join(", "),
    )
}
