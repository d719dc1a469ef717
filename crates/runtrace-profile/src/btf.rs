//! Where a field of a kernel struct lies, from the kernel's own type
//! information (BTF, `/sys/kernel/btf/vmlinux`): the off-CPU program reads
//! `task_struct.se.sum_exec_runtime` (a thread's CPU time) at a switch-out,
//! and its offset differs from one kernel build to the next.
//!
//! Only what that lookup needs is parsed: the header, the type records
//! (each kind's size, to step over it), struct members and the typedefs
//! and qualifiers in front of a type. Hand-written rather than a BTF crate
//! because it is ~150 lines and runs once per recording; the crates
//! (`btf-rs`, libbpf's) bring a whole type model for this one walk.

/// The `.BTF` magic number.
const MAGIC: u16 = 0xeb9f;

// Kinds (linux/btf.h).
const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// One type record: where its kind-specific data starts.
#[derive(Clone, Copy)]
struct Type {
    name_off: u32,
    info: u32,
    size_or_type: u32,
    /// Byte offset of the data after the 12-byte record.
    data: usize,
}

impl Type {
    fn kind(&self) -> u32 {
        (self.info >> 24) & 0x1f
    }
    fn vlen(&self) -> usize {
        (self.info & 0xffff) as usize
    }
    fn kind_flag(&self) -> bool {
        self.info >> 31 != 0
    }
}

/// A parsed BTF blob: its type records (id `n` is `types[n - 1]`) and its
/// string section.
pub(crate) struct Btf<'a> {
    types: Vec<Type>,
    /// The type section.
    tsec: &'a [u8],
    strs: &'a [u8],
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

impl<'a> Btf<'a> {
    /// Parses `data` (a little-endian BTF blob, as x86-64 and arm64
    /// kernels have); Err says what is wrong and at which byte.
    pub(crate) fn parse(data: &'a [u8]) -> Result<Btf<'a>, String> {
        let magic = data.get(..2).map(|m| u16::from_le_bytes([m[0], m[1]]));
        if magic != Some(MAGIC) {
            return Err("not BTF (bad magic at byte 0)".into());
        }
        let hdr = |at: usize| u32_at(data, at).ok_or("BTF header cut short at byte 4");
        let hdr_len = hdr(4)? as usize;
        let (type_off, type_len) = (hdr(8)? as usize, hdr(12)? as usize);
        let (str_off, str_len) = (hdr(16)? as usize, hdr(20)? as usize);
        let section = |off: usize, len: usize, what: &str| {
            let start = hdr_len.checked_add(off);
            start
                .and_then(|s| data.get(s..s.checked_add(len)?))
                .ok_or(format!(
                "BTF {what} section (bytes {off}+{len} after the header) lies outside the {} bytes",
                data.len()
            ))
        };
        let tsec = section(type_off, type_len, "type")?;
        let strs = section(str_off, str_len, "string")?;
        let mut types = Vec::new();
        let mut at = 0;
        while at < tsec.len() {
            let rec = |k: usize| {
                u32_at(tsec, at + 4 * k).ok_or(format!(
                    "BTF type {} cut short at byte {at}",
                    types.len() + 1
                ))
            };
            let t = Type {
                name_off: rec(0)?,
                info: rec(1)?,
                size_or_type: rec(2)?,
                data: at + 12,
            };
            let extra = match t.kind() {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
                KIND_ARRAY => 12,
                KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 12 * t.vlen(),
                KIND_ENUM | KIND_FUNC_PROTO => 8 * t.vlen(),
                // PTR, FWD, TYPEDEF, the qualifiers, FUNC, FLOAT, TYPE_TAG.
                2 | 7 | KIND_TYPEDEF..=KIND_RESTRICT | 12 | 16 | KIND_TYPE_TAG => 0,
                k => {
                    return Err(format!(
                        "BTF type {} has unknown kind {k} at byte {at}",
                        types.len() + 1
                    ))
                }
            };
            types.push(t);
            at = t.data + extra;
        }
        Ok(Btf { types, tsec, strs })
    }

    fn name(&self, off: u32) -> &[u8] {
        let s = self.strs.get(off as usize..).unwrap_or_default();
        &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]
    }

    fn get(&self, id: u32) -> Option<&Type> {
        self.types.get((id as usize).checked_sub(1)?)
    }

    /// The type behind typedefs and qualifiers.
    fn resolve(&self, mut id: u32) -> Option<(u32, &Type)> {
        // A loop bound, against a malformed chain that points at itself.
        for _ in 0..32 {
            let t = self.get(id)?;
            match t.kind() {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_or_type
                }
                _ => return Some((id, t)),
            }
        }
        None
    }

    /// Member `name` of the struct `t`: (its type id, its offset in bits).
    fn member(&self, t: &Type, name: &str) -> Option<(u32, u32)> {
        (0..t.vlen()).find_map(|k| {
            let at = t.data + 12 * k;
            let (n, ty, off) = (
                u32_at(self.tsec, at)?,
                u32_at(self.tsec, at + 4)?,
                u32_at(self.tsec, at + 8)?,
            );
            // With the kind flag, the top byte is a bitfield's size.
            let bits = if t.kind_flag() { off & 0xff_ffff } else { off };
            (self.name(n) == name.as_bytes()).then_some((ty, bits))
        })
    }

    /// The byte offset of `path` (members, outermost first) inside
    /// `struct root`, and the size of the last member's type; Err says
    /// which step is missing.
    ///
    /// ```ignore
    /// let btf = Btf::parse(&std::fs::read("/sys/kernel/btf/vmlinux")?)?;
    /// let (at, size) = btf.offset_of("task_struct", &["se", "sum_exec_runtime"])?;
    /// ```
    pub(crate) fn offset_of(&self, root: &str, path: &[&str]) -> Result<(u32, u32), String> {
        let is_struct = |t: &Type| t.kind() == KIND_STRUCT && t.vlen() > 0;
        let mut t = *self
            .types
            .iter()
            .find(|t| is_struct(t) && self.name(t.name_off) == root.as_bytes())
            .ok_or(format!("no struct {root} in the kernel's BTF"))?;
        let mut bits = 0u64;
        let mut size = 0;
        for (k, step) in path.iter().enumerate() {
            let (ty, off) = self
                .member(&t, step)
                .ok_or(format!("struct {root}: no member {}", path[..=k].join(".")))?;
            bits += off as u64;
            let (_, inner) = self
                .resolve(ty)
                .ok_or(format!("{root}.{}: a dangling type", path[..=k].join(".")))?;
            t = *inner;
            size = match t.kind() {
                KIND_INT | KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64 => t.size_or_type,
                _ => 0,
            };
        }
        if !bits.is_multiple_of(8) {
            return Err(format!("{root}.{} is a bitfield", path.join(".")));
        }
        let bytes = u32::try_from(bits / 8).map_err(|_| format!("{root}: offset out of range"))?;
        Ok((bytes, size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob built from (name, info, size_or_type, extra words).
    fn blob(names: &[&str], types: &[(u32, u32, u32, Vec<u32>)]) -> Vec<u8> {
        let mut strs = vec![0u8];
        for n in names {
            strs.extend_from_slice(n.as_bytes());
            strs.push(0);
        }
        let mut tsec = Vec::new();
        for (name, info, st, extra) in types {
            for w in [*name, *info, *st].iter().chain(extra) {
                tsec.extend_from_slice(&w.to_le_bytes());
            }
        }
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC.to_le_bytes());
        b.extend_from_slice(&[1, 0]);
        for w in [
            24,
            0,
            tsec.len() as u32,
            tsec.len() as u32,
            strs.len() as u32,
        ] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&tsec);
        b.extend_from_slice(&strs);
        b
    }

    /// The string offset of `names[i]` in `blob`'s string section.
    fn s(names: &[&str], i: usize) -> u32 {
        1 + names[..i].iter().map(|n| n.len() as u32 + 1).sum::<u32>()
    }

    fn info(kind: u32, vlen: u32) -> u32 {
        kind << 24 | vlen
    }

    #[test]
    fn nested_member_offsets_through_typedefs() {
        let n = [
            "u64",
            "task_struct",
            "se",
            "sched_entity",
            "sum_exec_runtime",
            "pid",
            "x",
        ];
        let types = vec![
            // 1: u64 (INT, 8 bytes)
            (s(&n, 0), info(KIND_INT, 0), 8, vec![64]),
            // 2: typedef u64
            (s(&n, 0), info(KIND_TYPEDEF, 0), 1, vec![]),
            // 3: a FUNC_PROTO with two params, to be stepped over
            (0, info(KIND_FUNC_PROTO, 2), 1, vec![0, 1, 0, 1]),
            // 4: struct sched_entity { x; sum_exec_runtime at 64 bytes }
            (
                s(&n, 3),
                info(KIND_STRUCT, 2),
                80,
                vec![s(&n, 6), 1, 0, s(&n, 4), 2, 512],
            ),
            // 5: const struct sched_entity
            (0, info(KIND_CONST, 0), 4, vec![]),
            // 6: struct task_struct { pid at 0; se at 128 bytes }
            (
                s(&n, 1),
                info(KIND_STRUCT, 2),
                4096,
                vec![s(&n, 5), 1, 0, s(&n, 2), 5, 1024],
            ),
        ];
        let b = blob(&n, &types);
        let btf = Btf::parse(&b).unwrap();
        assert_eq!(
            btf.offset_of("task_struct", &["se", "sum_exec_runtime"]),
            Ok((128 + 64, 8))
        );
        let e = btf.offset_of("task_struct", &["se", "nope"]).unwrap_err();
        assert!(e.contains("se.nope"), "{e}");
        let e = btf.offset_of("mm_struct", &["x"]).unwrap_err();
        assert!(e.contains("no struct mm_struct"), "{e}");
        // Cut anywhere, the blob is refused or yields no answer; never a
        // panic.
        for cut in 0..b.len() {
            if let Ok(btf) = Btf::parse(&b[..cut]) {
                let _ = btf.offset_of("task_struct", &["se", "sum_exec_runtime"]);
            }
        }
        assert!(Btf::parse(b"\x00\x00junk").err().unwrap().contains("magic"));
    }

    #[test]
    fn the_running_kernel_has_the_field() {
        let Ok(data) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI needs /sys/kernel/btf/vmlinux"
            );
            eprintln!("skipped: no /sys/kernel/btf/vmlinux");
            return;
        };
        let btf = Btf::parse(&data).unwrap();
        let (at, size) = btf
            .offset_of("task_struct", &["se", "sum_exec_runtime"])
            .unwrap();
        assert_eq!(size, 8);
        assert!(at > 0 && at < 16384, "{at}");
    }
}
