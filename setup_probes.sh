#!/usr/bin/env bash
# Installs (or removes) perf probe events for runtrace's probes, generated
# from the event catalog (probes/events.toml). Run `setup_probes.sh -h`.
#
# Two routes, both fed by the same catalog:
# - function probes (default; build with `--features perf-probe`): every
#   event E has a `#[no_mangle] extern "C" fn runtrace_E(...)` whose
#   arguments are, in catalog order, in the C ABI registers %di %si %dx %cx
#   %r8 %r9. This script gives each one a name and a type, so `perf script`
#   prints `task_id=42 worker=1 queue="..."`. Event group: the provider.
# - SDT probes (`--sdt`; build with `--features usdt`): the binary's
#   `.note.stapsdt` entries, added as `sdt_<provider>:<event>`. perf names
#   their arguments arg1, arg2, ... (catalog order) and prints them as u64;
#   strings arrive as addresses.
#
# A probe event refers to one build of a binary (file offsets): after a
# rebuild, run this again; it deletes the group's events of those names (on
# any binary) and adds them anew. perf probe checks event names across all
# groups (it refuses runtrace:task_spawn while sdt_runtrace:task_spawn
# exists, and -f renames it task_spawn_1), so perf computes the definitions
# in a dry run (`perf probe -n -v`) and this script writes them to tracefs
# under their exact names, as perf probe itself would; `perf probe -l/-d`
# and `perf record -e` treat them like any other.

set -euo pipefail

prog=$(basename "$0")
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
    cat <<EOF
usage: $prog [--catalog FILE] [--group NAME] [-n] BINARY
       $prog [--catalog FILE] [--group NAME] --delete [BINARY]
       $prog [--catalog FILE] --sdt [-n] BINARY
       $prog [--catalog FILE] --sdt --delete [BINARY]

Installs perf probe events for every event of the runtrace event catalog.

  BINARY          an executable built with runtrace's \`perf-probe\` feature
                  (function probes) or \`usdt\` feature (--sdt)
  (default)       function probes <group>:<event> on the functions
                  <provider>_<event>, with named, typed arguments
  --sdt           the binary's SDT probes instead: sdt_<provider>:<event>
                  for each event in its .note.stapsdt (arguments arg1..)
  --delete        remove those events (with BINARY: only the ones placed
                  on BINARY) and exit
  --catalog FILE  event catalog (default: probes/events.toml next to this
                  script); an application's own catalog installs its
                  provider's functions (<provider>_<event>, group <provider>)
  --group NAME    event group of the function probes (default: the
                  catalog's provider)
  -n, --dry-run   print the perf probe commands instead of running them
                  (needs neither root nor perf)
  -h, --help      this help

Then, for example:
  perf record -e '<group>:*' -- BINARY ARGS...
  perf script -s $script_dir/probes/perf-aggregate.py
Run as root (perf probe writes to tracefs). Re-run after every rebuild of
BINARY: probe offsets are fixed when an event is added.
EOF
}

die() {
    echo "$prog: error: $*" >&2
    exit 1
}
note() { echo "$prog: $*" >&2; }

catalog="$script_dir/probes/events.toml"
mode=functions
delete=false
dry_run=false
group=""
binary=""
while [[ $# -gt 0 ]]; do
    case "$1" in
    -h | --help)
        usage
        exit 0
        ;;
    --sdt) mode=sdt ;;
    --delete | -d) delete=true ;;
    -n | --dry-run) dry_run=true ;;
    --catalog)
        [[ $# -ge 2 ]] || die "--catalog needs a file"
        catalog=$2
        shift
        ;;
    --catalog=*) catalog=${1#--catalog=} ;;
    --group)
        [[ $# -ge 2 ]] || die "--group needs a name"
        group=$2
        shift
        ;;
    --group=*) group=${1#--group=} ;;
    --)
        shift
        break
        ;;
    -*)
        usage >&2
        die "unknown option $1"
        ;;
    *)
        [[ -z "$binary" ]] || die "one BINARY only (got '$binary' and '$1')"
        binary=$1
        ;;
    esac
    shift
done
if [[ $# -gt 0 ]]; then
    [[ -z "$binary" && $# -eq 1 ]] || die "one BINARY only"
    binary=$1
fi

if [[ -n "$group" && "$mode" == sdt ]]; then
    die "--group applies to function probes only (perf names SDT events sdt_<provider>:<event>)"
fi
if [[ -n "$group" && ! "$group" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
    die "--group: '$group' is not a valid event group name (letters, digits, _)"
fi
if [[ -z "$binary" && "$delete" == false ]]; then
    usage >&2
    die "no BINARY given"
fi

# --- The catalog -> one line per event ------------------------------------
command -v python3 >/dev/null 2>&1 ||
    die "python3 not found (needed to read the catalog; Python >= 3.11 for tomllib)"
[[ -f "$catalog" ]] || die "catalog $catalog not found (use --catalog FILE)"

# Output: "P <provider>", then per event "E <event> <nfields> <arg specs...>"
# or "S <event> <reason>" (no function exists for it), and "N <text>" notes.
# shellcheck disable=SC2016
gen_py='
import sys
try:
    import tomllib
except ImportError:
    sys.exit("python3 %s has no tomllib: Python >= 3.11 is needed" % sys.version.split()[0])
import re

path = sys.argv[1]
try:
    with open(path, "rb") as f:
        cat = tomllib.load(f)
except (OSError, tomllib.TOMLDecodeError) as e:
    sys.exit("%s: %s" % (path, e))

ident = re.compile(r"^[a-z_][a-z0-9_]*$")
provider = cat.get("provider", "runtrace")
if not isinstance(provider, str) or not ident.match(provider):
    sys.exit("%s: provider %r must be snake_case" % (path, provider))
events = cat.get("event", [])
if not events:
    sys.exit("%s: no [[event]] entries" % path)

REGS = ["di", "si", "dx", "cx", "r8", "r9"]
# How perf fetches and prints each catalog type. Every argument arrives in a
# full 64-bit register: integers zero-extended (i64/i32 sign-extended),
# bool as 0/1, f64 as its IEEE bits, strings as pointers to NUL-terminated
# text.
TYPES = {
    "u64": "u64", "task": "u64",
    "u32": "u32", "worker": "u32",
    "u16": "u16",
    "u8": "u8", "bool": "u8",
    "i64": "s64", "i32": "s64",
    "f64": "x64",
}
STRINGS = {"str", "istr", "loc"}

print("P", provider)
f64_fields = []
for ev in events:
    name = ev.get("name")
    if not isinstance(name, str) or not ident.match(name):
        sys.exit("%s: event name %r must be snake_case" % (path, name))
    if ev.get("kind") == "profile":
        continue  # written by the recorder itself (CPU samples): no probe site
    fields = ev.get("fields", [])
    if len(fields) > len(REGS):
        print("S", name, "has %d fields: arguments past the sixth would be on the stack, "
              "so runtrace generates no %s_%s function for it (use --sdt)" % (len(fields), provider, name))
        continue
    specs = []
    for reg, fld in zip(REGS, fields):
        fname, ty = fld.get("name"), fld.get("type")
        if not isinstance(fname, str) or not ident.match(fname):
            sys.exit("%s: %s: field name %r must be snake_case" % (path, name, fname))
        if ty in STRINGS:
            specs.append("%s=+0(%%%s):string" % (fname, reg))
        elif ty in TYPES:
            specs.append("%s=%%%s:%s" % (fname, reg, TYPES[ty]))
            if ty == "f64":
                f64_fields.append("%s.%s" % (name, fname))
        else:
            sys.exit("%s: %s.%s: unknown type %r" % (path, name, fname, ty))
    print("E", name, len(fields), *specs)
if f64_fields:
    print("N", "f64 fields are printed as their IEEE 754 bits in hex (perf has no float type): "
          + ", ".join(f64_fields) + "; probes/perf-aggregate.py decodes them "
          "(python: struct.unpack(\"<d\", struct.pack(\"<Q\", v)))")
'
catalog_lines=$(python3 -c "$gen_py" "$catalog") || die "cannot read catalog $catalog"

provider=""
declare -a ev_names=() ev_specs=() skipped=() notes=()
while IFS= read -r line; do
    read -r kind rest <<<"$line"
    case "$kind" in
    P) provider=$rest ;;
    E)
        read -r name _nfields specs <<<"$rest"
        ev_names+=("$name")
        ev_specs+=("${specs:-}")
        ;;
    S) skipped+=("$rest") ;;
    N) notes+=("$rest") ;;
    esac
done <<<"$catalog_lines"
[[ -n "$provider" ]] || die "catalog $catalog: no provider"
[[ -n "$group" ]] || group=$provider
sdt_group="sdt_$provider"

# --- Environment checks ----------------------------------------------------
if [[ -n "$binary" ]]; then
    [[ -e "$binary" ]] || die "binary $binary does not exist"
    [[ -f "$binary" ]] || die "$binary is not a regular file"
    [[ -x "$binary" ]] || die "$binary is not executable"
    [[ "$(head -c 4 "$binary" | od -An -c | tr -d ' ')" == '177ELF' ]] ||
        die "$binary is not an ELF file"
    # perf records the absolute path in the uprobe.
    binary=$(readlink -f "$binary")
    # A uprobe definition is "p:GROUP/EVENT PATH:OFFSET ARGS": words split
    # at blanks, the path ended by a colon. perf 6.1 cuts a path at its first
    # colon (so /a/x:0x10/app became a probe on the file /a/x, if it exists),
    # and nothing can carry a blank. Refuse such paths rather than probe
    # another file.
    case "$binary" in
    *[[:space:]]* | *:*)
        die "the path $binary contains a blank or a ':', which a uprobe definition (PATH:OFFSET) cannot carry:
  perf would place the probes on another file. Hard-link the binary to a plain path on the same file system
  (a uprobe belongs to the file, so running it by its old path fires the probes too; a symbolic link does
  not help, it resolves to the same path) and give that path:
  ln '$binary' /path/without/blanks/app && $prog $([[ $mode == sdt ]] && echo '--sdt ')/path/without/blanks/app"
        ;;
    esac
fi

if [[ "$dry_run" == false ]]; then
    command -v perf >/dev/null 2>&1 ||
        die "perf not found (Debian/Ubuntu: apt-get install linux-perf / linux-tools-\$(uname -r))"
    [[ $EUID -eq 0 ]] ||
        die "must be run as root: perf probe writes to tracefs (try: sudo $0 ...)"
fi

tracefs=""
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
    if [[ -e "$d/uprobe_events" ]]; then
        tracefs=$d
        break
    fi
done
if [[ -z "$tracefs" && "$dry_run" == false ]]; then
    die "tracefs with uprobe_events not found (mount -t tracefs nodev /sys/kernel/tracing; kernel needs CONFIG_UPROBE_EVENTS)"
fi

# Installed uprobe events as "group:event path", one per line (an SDT event
# with several sites appears once per site).
installed() {
    [[ -n "$tracefs" ]] || return 0
    sed -n 's#^[pr]:\([^/ ]*\)/\([^ ]*\) \([^ ]*\):0x.*#\1:\2 \3#p' "$tracefs/uprobe_events"
}

# Deletes the installed events "group:event" (and "group:event_N"
# duplicates left by perf probe -f) for the given event names in $1's group;
# with only_binary set, only events placed on that binary.
delete_events() {
    local grp=$1 only_binary=$2
    shift 2
    local -A wanted=()
    local e
    for e in "$@"; do wanted[$e]=1; done
    local -a del=()
    local -A seen=()
    local ge path g ev base
    while read -r ge path; do
        [[ -n "$ge" ]] || continue
        g=${ge%%:*}
        ev=${ge#*:}
        [[ "$g" == "$grp" ]] || continue
        base=$ev
        [[ "$ev" =~ ^(.*)_[0-9]+$ && -n "${wanted[${BASH_REMATCH[1]}]:-}" ]] && base=${BASH_REMATCH[1]}
        [[ -n "${wanted[$base]:-}" || "$#" -eq 0 ]] || continue
        [[ -z "$only_binary" || "$path" == "$only_binary" ]] || continue
        [[ -z "${seen[$ge]:-}" ]] || continue
        seen[$ge]=1
        del+=("$ge")
    done < <(installed)
    if [[ ${#del[@]} -eq 0 ]]; then
        return 0
    fi
    local -a args=()
    for e in "${del[@]}"; do args+=(-d "$e"); done
    if [[ "$dry_run" == true ]]; then
        echo "perf probe -q ${args[*]}"
        return 0
    fi
    perf probe -q "${args[@]}" || die "perf probe ${args[*]} failed"
    for e in "${del[@]}"; do echo "removed $e"; done
}

# SDT events of $provider in the binary's .note.stapsdt, one name per line.
sdt_events() {
    readelf -n "$1" 2>/dev/null | awk -v prov="$provider" '
        /^ *Provider:/ { p = $2 }
        /^ *Name:/ && p == prov { if (!seen[$2]++) print $2 }'
}

if [[ "$delete" == true ]]; then
    if [[ "$mode" == sdt ]]; then
        # The whole sdt_<provider> group: it only ever holds this provider's
        # SDT events (also ones the catalog no longer lists).
        delete_events "$sdt_group" "$binary"
    else
        delete_events "$group" "$binary" "${ev_names[@]}"
    fi
    exit 0
fi

# Adds the probe definitions `perf probe -x BINARY -a DEF...` computes, under
# their exact names GROUP:EVENT. perf probe itself refuses (or, with -f,
# renames to EVENT_1) an event whose name exists in *any* group, so
# runtrace:task_spawn and sdt_runtrace:task_spawn could not coexist, and an
# unrelated binary's event of the same name would get in the way. So perf
# computes the uprobe definitions (file offsets, semaphore, registers) in a
# dry run, and they are written to tracefs under their own names, which is
# all perf probe does too. Args: GROUP, the event names, then perf's -a args.
# Sets $added_defs (the lines written).
install_defs() {
    local grp=$1
    shift
    local -a names=()
    while [[ $1 != -- ]]; do
        names+=("$1")
        shift
    done
    shift
    local -A wanted=()
    local e
    for e in "${names[@]}"; do wanted[$e]=1; done

    local out
    if [[ "$grp" == "$sdt_group" ]]; then
        # perf probe reads SDT notes from its build-id cache; a real
        # `perf probe -a` adds the binary there, a dry run does not. When the
        # same build was cached under another path, perf 6.1 leaves this
        # path's probe list empty: --update rescans it.
        perf buildid-cache --add "$binary" >/dev/null 2>&1 || true
        if ! perf probe -n -f -x "$binary" "$@" >/dev/null 2>&1; then
            if ! out=$(perf buildid-cache --update "$binary" 2>&1); then
                echo "$out" >&2
                die "perf buildid-cache --update $binary failed (perf reads SDT notes from its build-id cache)"
            fi
        fi
    fi
    if ! out=$(perf probe -n -v -f -x "$binary" "$@" 2>&1); then
        grep -v -E '^(Parsing probe_events|Group:|Opening |Writing event)' <<<"$out" >&2 || true
        die "perf probe could not place the probes on $binary (its messages are above)"
    fi
    local -a defs=()
    mapfile -t defs < <(sed -n 's/^Writing event: //p' <<<"$out")
    if [[ ${#defs[@]} -eq 0 ]]; then
        die "perf probe -n -v printed no 'Writing event:' lines (unexpected perf version $(perf version 2>/dev/null))"
    fi
    # Definitions: "p:GROUP/EVENT[_N] PATH:OFFSET[(SEMAPHORE)] ARGS...".
    local -a fixed=()
    local d head rest g ev loc
    for d in "${defs[@]}"; do
        head=${d%% *}
        rest=${d#* }
        g=${head#p:}
        g=${g%%/*}
        ev=${head#*/}
        if [[ -z "${wanted[$ev]:-}" && "$ev" =~ ^(.*)_[0-9]+$ && -n "${wanted[${BASH_REMATCH[1]}]:-}" ]]; then
            ev=${BASH_REMATCH[1]}
        fi
        [[ "$g" == "$grp" && -n "${wanted[$ev]:-}" ]] || die "unexpected definition from perf probe: $d"
        # The probe must sit on the binary given, not on a file perf made of
        # a part of its path.
        loc=${rest%% *}
        [[ "${loc%:*}" == "$binary" ]] ||
            die "perf probe placed $head on ${loc%:*}, not on $binary: nothing installed"
        fixed+=("p:$grp/$ev $rest")
    done

    # Re-install cleanly: drop this group's events of these names (on any
    # binary: the names are what perf record -e selects).
    delete_events "$grp" "" "${names[@]}"
    local err
    for d in "${fixed[@]}"; do
        # >> appends; > would clear every uprobe event on the system.
        if ! err=$( { printf '%s\n' "$d" >>"$tracefs/uprobe_events"; } 2>&1); then
            local log=""
            [[ -r "$tracefs/error_log" ]] && log=$(tail -n 3 "$tracefs/error_log")
            die "the kernel refused the uprobe definition
  $d
  ($err)${log:+
  $tracefs/error_log:
$log}"
        fi
    done
    added_defs=("${fixed[@]}")
}

# --- SDT route --------------------------------------------------------------
if [[ "$mode" == sdt ]]; then
    command -v readelf >/dev/null 2>&1 || die "readelf not found (binutils): needed to list the SDT notes"
    mapfile -t in_binary < <(sdt_events "$binary")
    if [[ ${#in_binary[@]} -eq 0 ]]; then
        die "$binary has no SDT probes of provider '$provider' in .note.stapsdt (build it with runtrace's \`usdt\` feature)"
    fi
    declare -A in_cat=()
    for e in "${ev_names[@]}"; do in_cat[$e]=1; done
    for s in "${skipped[@]}"; do in_cat[${s%% *}]=1; done
    declare -A in_bin=()
    for e in "${in_binary[@]}"; do in_bin[$e]=1; done

    declare -a args=()
    for e in "${in_binary[@]}"; do args+=(-a "$sdt_group:$e"); done
    if [[ "$dry_run" == true ]]; then
        echo "perf probe -x $binary ${args[*]}"
        exit 0
    fi
    install_defs "$sdt_group" "${in_binary[@]}" -- "${args[@]}"
    echo "installed SDT events on $binary (arguments arg1.. are the catalog fields in order):"
    declare -A sites=()
    for d in "${added_defs[@]}"; do
        ge=${d%% *}
        ge=${ge#p:}
        ge=${ge/\//:}
        sites[$ge]=$((${sites[$ge]:-0} + 1))
    done
    for e in "${in_binary[@]}"; do
        ge="$sdt_group:$e"
        printf '  %-34s %d site(s)%s\n' "$ge" "${sites[$ge]:-0}" \
            "$([[ -n "${in_cat[$e]:-}" ]] || echo "  (not in catalog $catalog)")"
    done
    for e in "${ev_names[@]}"; do
        [[ -n "${in_bin[$e]:-}" ]] || note "note: $provider:$e has no SDT site in $binary (never fired there, or optimized out)"
    done
    echo "record with: perf record -e '$sdt_group:*' -- $binary ..."
    exit 0
fi

# --- Function route ---------------------------------------------------------
if [[ ${#ev_names[@]} -eq 0 ]]; then
    die "no event of $catalog can have a function probe"
fi
if [[ "$dry_run" == true ]]; then
    printf 'perf probe -x %s' "${binary:-BINARY}"
    for i in "${!ev_names[@]}"; do
        spec="$group:${ev_names[$i]}=${provider}_${ev_names[$i]}"
        [[ -z "${ev_specs[$i]}" ]] || spec+=" ${ev_specs[$i]}"
        printf ' \\\n    -a %s' "'$spec'"
    done
    echo
    for n in "${notes[@]}"; do echo "# $n"; done
    for s in "${skipped[@]}"; do echo "# skipped $provider:$s"; done
    exit 0
fi
if command -v readelf >/dev/null 2>&1; then
    syms=$(readelf -W --syms "$binary" 2>/dev/null |
        awk '$4 == "FUNC" && $7 != "UND" { sub(/@.*/, "", $8); print $8 }' | sort -u)
    has_symtab=true
    # The section list is read whole before it is searched: `readelf | grep
    # -q` under pipefail fails when grep exits first and readelf gets
    # SIGPIPE (seen in CI: a binary with a .symtab called stripped).
    sections=$(readelf -W -S "$binary" 2>/dev/null || true)
    grep -qF ' .symtab ' <<<"$sections" || has_symtab=false
    declare -a missing=()
    for e in "${ev_names[@]}"; do
        grep -qxF "${provider}_$e" <<<"$syms" || missing+=("${provider}_$e")
    done
    if [[ ${#missing[@]} -gt 0 ]]; then
        if [[ "$has_symtab" == false ]]; then
            die "$binary is stripped (no .symtab): the functions ${missing[*]} cannot be found.
  Build without stripping (no \`strip = true\`/\`strip = \"symbols\"\` in the profile), or use the SDT probes,
  which survive stripping: $prog --sdt $binary (needs runtrace's \`usdt\` feature)"
        elif [[ ${#missing[@]} -eq ${#ev_names[@]} ]]; then
            die "$binary has none of the $provider perf-probe functions (${missing[0]}, ...):
  build it with runtrace's \`perf-probe\` feature (or use --sdt for a \`usdt\` build)"
        fi
        # The linker keeps a function only where some probe site calls it:
        # a binary that never fires an event (an application without
        # runtrace::sync has no lock_wait site) has no function for it.
        declare -a keep_names=() keep_specs=()
        for i in "${!ev_names[@]}"; do
            if grep -qxF "${provider}_${ev_names[$i]}" <<<"$syms"; then
                keep_names+=("${ev_names[$i]}")
                keep_specs+=("${ev_specs[$i]}")
            else
                note "note: $provider:${ev_names[$i]} has no function in $binary (no probe site fires it there; or the binary comes from another version of $catalog)"
            fi
        done
        ev_names=("${keep_names[@]}")
        ev_specs=("${keep_specs[@]}")
    fi
else
    note "readelf not found: not checking the binary's symbols (perf will)"
fi

declare -a args=()
for i in "${!ev_names[@]}"; do
    e=${ev_names[$i]}
    spec="$group:$e=${provider}_$e"
    [[ -z "${ev_specs[$i]}" ]] || spec+=" ${ev_specs[$i]}"
    args+=(-a "$spec")
done
install_defs "$group" "${ev_names[@]}" -- "${args[@]}"
echo "installed function probes on $binary:"
for d in "${added_defs[@]}"; do
    # p:GROUP/EVENT PATH:OFFSET ARGS
    ge=${d%% *}
    ge=${ge#p:}
    rest=${d#* }
    loc=${rest%% *}
    argstr=""
    [[ "$rest" == *" "* ]] && argstr=${rest#* }
    ev=${ge#*/}
    printf '  %-28s %s_%s (+%s)  %s\n' "${ge/\//:}" "$provider" "$ev" "${loc##*:}" "$argstr"
done
for n in "${notes[@]}"; do note "note: $n"; done
for s in "${skipped[@]}"; do note "skipped $provider:$s"; done
echo "record with: perf record -e '$group:*' -- $binary ..."
