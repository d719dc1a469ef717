"""Drives `runtrace mcp` with the official MCP Python SDK (mcp.client.stdio):
every tool on recorded traces, and the error paths. Run by tests/mcp.rs:

    python3 mcp_client.py RUNTRACE QUICKSTART_DIR BACKLOG_DIR DAMAGED_FILE PROFILED_DIR WAITING_DIR

Prints `N passed, 0 failed` and exits 0 when every check holds; raises
(exit 1) at the first that does not.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TOOLS = {
    "load_trace", "list_traces", "unload_trace", "get_trace_summary",
    "run_all_analyzers", "analyze_wakeup_latency", "analyze_poll_times",
    "analyze_workers", "analyze_spawn_locations", "analyze_backlog", "analyze_blocked",
    "find_scheduling_bottlenecks", "detect_outliers", "query_trace_events",
    "get_task_timeline", "get_flamegraph", "get_memory_growth", "get_span_latencies", "get_window",
    "get_resource_waits",
}

checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1


async def ok(s, tool, args):
    r = await s.call_tool(tool, args)
    text = r.content[0].text
    check(not r.is_error, f"{tool} {args}: unexpected error: {text}")
    return json.loads(text)


async def err(s, tool, args, *needles):
    r = await s.call_tool(tool, args)
    text = r.content[0].text
    check(r.is_error, f"{tool} {args}: expected a tool error, got {text[:300]}")
    for n in needles:
        check(n in text, f"{tool} {args}: error {text!r} does not mention {n!r}")
    return text


async def main(runtrace, quick, backlog, damaged, profiled, waiting):
    params = StdioServerParameters(command=runtrace, args=["mcp"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            check(init.server_info.name == "runtrace", f"server name {init.server_info}")
            # A current protocol version, not a fallback to an old one.
            check(init.protocol_version >= "2025-06-18", f"protocol {init.protocol_version}")
            names = {t.name for t in (await s.list_tools()).tools}
            check(names == TOOLS, f"tools: {sorted(names ^ TOOLS)}")

            # Loading: a directory, a second trace, a damaged file.
            q = await ok(s, "load_trace", {"file_path": quick, "trace_id": "q"})
            check(q["events"] == 10625 and not q["damaged"], f"load q: {q}")
            b = await ok(s, "load_trace", {"file_path": [backlog], "trace_id": "b"})
            check(b["events"] > 0, f"load b: {b}")
            d = await ok(s, "load_trace", {"file_path": damaged, "trace_id": "d"})
            check(d["damaged"] and d["events"] > 0 and d["errors"], f"damaged: {d}")
            check("at byte" in d["errors"][0], f"damage names the offset: {d['errors']}")
            listed = await ok(s, "list_traces", {})
            check({t["trace_id"] for t in listed["traces"]} == {"q", "b", "d"}, f"list: {listed}")

            # Summary and run-all.
            sm = await ok(s, "get_trace_summary", {"trace_id": "q"})
            avail = sm["capabilities"]["available_events"]
            check("task_poll_start" in avail and "lock_wait" not in avail, f"available: {avail}")
            an = {a["name"]: a for a in sm["capabilities"]["analyzers"]}
            check(not an["backlog"]["applicable"] and "runtrace-sync" in an["backlog"]["reason"], f"{an['backlog']}")
            check(not an["flamegraph"]["applicable"], "flamegraph needs CPU samples")
            allq = await ok(s, "run_all_analyzers", {"trace_id": "q"})
            check(allq["analyze"]["events"] == 10625 and allq["backlog"] is None, "run_all q")
            check(allq["outliers"]["categories"]["poll"]["samples"] == 2712, "run_all outliers")
            allb = await ok(s, "run_all_analyzers", {"trace_id": "b"})
            check(allb["backlog"]["queues"], "run_all b has the backlog")
            check(allq["blocked"] is None and allq["elsewhere"] == [], "no CPU samples in q")

            # A CPU profile: the summary says what applies, run-all runs it.
            await ok(s, "load_trace", {"file_path": profiled, "trace_id": "p"})
            sp = await ok(s, "get_trace_summary", {"trace_id": "p"})
            check(sp["event_counts"].get("cpu_sample") == 19, f"samples counted: {sp['event_counts']}")
            anp = {a["name"]: a for a in sp["capabilities"]["analyzers"]}
            check(anp["blocked"]["applicable"] and anp["flamegraph"]["applicable"], f"{anp}")
            allp = await ok(s, "run_all_analyzers", {"trace_id": "p"})
            check(allp["blocked"]["culprits"][0]["location"].startswith("src/api.rs:5:9"), f"{allp['blocked']}")
            check([e["name"] for e in allp["elsewhere"]] == ["flamegraph"], f"{allp['elsewhere']}")
            bl = await ok(s, "analyze_blocked", {"trace_id": "p"})
            c = bl["culprits"][0]
            check(bl["applicable"] and bl["waits"] == 1 and c["samples"] == 19, f"blocked: {bl}")
            check(c["victims"][0]["location"].startswith("src/victim.rs"), f"victims: {c['victims']}")
            check(bl["threshold_ns"] == 10_000_000, "default threshold 10 ms")
            b30 = await ok(s, "analyze_blocked", {"trace_id": "p", "threshold_ms": 30})
            check(b30["waits"] == 0 and b30["culprits"] == [], f"a 23 ms wait is under 30 ms: {b30}")
            b0 = await ok(s, "analyze_blocked", {"trace_id": "p", "limit": 0})
            check(b0["culprits"] == [] and b0["truncated"] and b0["culprits_total"] == 1, f"limit: {b0}")
            bq2 = await ok(s, "analyze_blocked", {"trace_id": "q"})
            check(not bq2["applicable"] and "RUNTRACE_CPU_HZ" in bq2["reason"], f"{bq2.get('reason')}")
            fq = await ok(s, "get_flamegraph", {"trace_id": "q"})
            check(fq["total"] == 0 and "samples" in fq["note"], f"{fq}")
            await err(s, "analyze_blocked", {"trace_id": "p", "threshold_ms": 0}, "threshold_ms")
            # Folded stacks: 19 samples of one two-frame stack, root first.
            fg = await ok(s, "get_flamegraph", {"trace_id": "p"})
            check(fg["kind"] == "cpu" and fg["count_name"] == "samples", f"flamegraph: {fg}")
            check(fg["total"] == 19 and fg["stacks_total"] == 1 and not fg["truncated"], f"flamegraph: {fg}")
            st = fg["stacks"][0]
            check(st["count"] == 19 and len(st["stack"].split(";")) == 2, f"flamegraph: {fg}")
            check(st["stack"] == "[unknown] app+0x2000;[unknown] app+0x1000", f"root first: {st}")
            fl = await ok(s, "get_flamegraph", {"trace_id": "p", "location": "src/api.rs"})
            check(fl["total"] == 19, f"location: {fl}")
            fv = await ok(s, "get_flamegraph", {"trace_id": "p", "location": "src/victim.rs"})
            check(fv["total"] == 0 and fv["stacks"] == [] and "match the selection" in fv["note"], f"{fv}")
            # 10..=15 ms: 6 samples.
            ft = await ok(s, "get_flamegraph", {"trace_id": "p", "from": 10_000_000, "to": 15_000_000})
            check(ft["total"] == 6, f"time range: {ft}")
            fo = await ok(s, "get_flamegraph", {"trace_id": "p", "kind": "off_cpu"})
            check(fo["kind"] == "off_cpu" and fo["total"] == 0 and "no off-CPU samples" in fo["note"], f"{fo}")
            f0 = await ok(s, "get_flamegraph", {"trace_id": "p", "limit": 0})
            check(f0["stacks"] == [] and f0["truncated"] and f0["stacks_total"] == 1, f"limit: {f0}")
            # Memory kinds: a trace recorded without a memory profile says so.
            for k in ("alloc", "live"):
                fa = await ok(s, "get_flamegraph", {"trace_id": "p", "kind": k})
                check(fa["kind"] == k and fa["count_name"] == "bytes" and fa["total"] == 0, f"{fa}")
                check("no allocation samples" in fa["note"], f"{fa}")
            # No allocation samples: get_memory_growth does not apply, and says why.
            mg = await s.call_tool("get_memory_growth", {"trace_id": "p"})
            check("RUNTRACE_ALLOC_SAMPLE_BYTES" in mg.content[0].text, f"{mg.content[0].text[:300]}")
            await err(s, "get_flamegraph", {"trace_id": "p", "kind": "heap"}, "kind", "cpu, off_cpu, alloc or live")
            await err(s, "get_flamegraph", {"trace_id": "p", "from": 5, "to": 4}, "from", "to")
            await ok(s, "unload_trace", {"trace_id": "p"})

            # The analyses.
            wl = await ok(s, "analyze_wakeup_latency", {"trace_id": "q", "limit": 2})
            check(wl["wake_to_poll_ns"]["count"] > 0 and len(wl["spawn_locations"]) == 2, f"{wl}")
            check(wl["truncated"] and wl["spawn_locations_total"] == 7, "limit cuts and says so")
            p99s = [l["wake_to_poll_ns"]["p99"] for l in wl["spawn_locations"]]
            check(p99s == sorted(p99s, reverse=True), "worst p99 first")
            pt = await ok(s, "analyze_poll_times", {"trace_id": "q"})
            check(pt["poll_ns"]["count"] == 2712, f"{pt['poll_ns']}")
            wk = await ok(s, "analyze_workers", {"trace_id": "q"})
            check(wk["workers_total"] == 3, f"workers: {wk['workers_total']}")
            sl = await ok(s, "analyze_spawn_locations", {"trace_id": "q"})
            check(sum(l["tasks"] for l in sl["spawn_locations"]) >= 1307, "tasks by location")
            bq = await ok(s, "analyze_backlog", {"trace_id": "q"})
            check(bq["applicable"] is False and "runtrace-sync" in bq["reason"], f"{bq.get('reason')}")
            bb = await ok(s, "analyze_backlog", {"trace_id": "b", "limit": 1})
            check(bb["applicable"] and len(bb["queues"]) <= 1 and bb["triggers_total"] >= 0, "backlog b")
            sq = await ok(s, "get_span_latencies", {"trace_id": "q"})
            check(sq["applicable"] is False and "spans" in sq["reason"], f"spans: {sq}")
            # tokio resources: none in q; a Mutex held across an await in w.
            rq = await ok(s, "get_resource_waits", {"trace_id": "q"})
            check(rq["applicable"] is False and "resource" in rq["reason"] and rq["resources"] == [], f"resources q: {rq}")
            await ok(s, "load_trace", {"file_path": waiting, "trace_id": "w"})
            rw = await ok(s, "get_resource_waits", {"trace_id": "w"})
            check(rw["applicable"] and rw["resources_total"] == 1 and not rw["truncated"], f"resources w: {rw}")
            m = rw["resources"][0]
            check(m["resource"] == {"kind": "Mutex", "created_at": "src/state.rs:4:17", "internal": False,
                                    "created_by": None, "label": "Mutex src/state.rs:4:17"}, f"{m['resource']}")
            check(m["waits"] == 160 and m["wait_ns_total"] == 160 * 35_090_000, f"waits: {m['waits']}")
            check(abs(m["wait_p99_ns"] - 35_090_000) * 128 <= 35_090_000, f"p99 {m['wait_p99_ns']}")
            check(m["waiters"][0]["spawn_loc"] == "src/req.rs:40:9" and m["waiters"][0]["waits"] == 160, f"{m['waiters']}")
            h = m["holders"][0]
            check(h["spawn_loc"] == "src/sync.rs:12:5" and h["holds"] == 20 and h["holds_across_await"] == 20, f"holder {h}")
            lw = m["longest_waits"][0]
            check(lw["task"] == 100 and lw["wait_ns"] == 35_090_000 and lw["released_by"] == "src/sync.rs:12:5"
                  and lw["spawn_loc"] == "src/req.rs:40:9" and lw["start_ns"] == 6_011_000, f"longest {lw}")
            r1 = await ok(s, "get_resource_waits", {"trace_id": "w", "limit": 1})
            check(len(r1["resources"][0]["longest_waits"]) == 1 and r1["resources"][0]["longest_waits_total"] == 8
                  and r1["truncated"], f"limit 1: {r1}")
            for f, n in [("Mutex", 1), ("state.rs:4", 1), ("Semaphore", 0)]:
                rf = await ok(s, "get_resource_waits", {"trace_id": "w", "resource": f})
                check(rf["resources_total"] == n and rf["sites_waited_on"] == 1, f"filter {f}: {rf}")
            await err(s, "get_resource_waits", {"trace_id": "w", "resource": 7}, "resource", "string")
            await err(s, "get_resource_waits", {"trace_id": "w", "limit": -1}, "limit")
            fb = await ok(s, "find_scheduling_bottlenecks", {"trace_id": "q"})
            kinds = {f["kind"] for f in fb["findings"]}
            check("long_poll" in kinds, f"findings: {kinds}")

            # Outliers, every method.
            for m in ["IQR", "MAD", "StdDev", "Percentile"]:
                o = await ok(s, "detect_outliers", {"trace_id": "q", "method": m, "category": "poll", "limit": 5})
                cat = o["categories"]["poll"]
                check(list(o["categories"]) == ["poll"] and cat["samples"] == 2712, f"{m}: {list(o['categories'])}")
                for x in cat["outliers"]:
                    check(x["value"] > x["threshold"] if x["direction"] == "high" else x["value"] < x["threshold"], f"{m}: {x}")
                    check(x["spawn_loc"] and "task_id" in x and len(x["window_ns"]) == 2, f"{m}: {x}")
            o = await ok(s, "detect_outliers", {"trace_id": "q", "method": "IQR", "category": "all"})
            check(set(o["categories"]) == {"latency", "poll", "cpu"}, "all categories")

            # Queries.
            qe = await ok(s, "query_trace_events", {"trace_id": "q"})
            check(qe["returned"] == 100 and qe["truncated"] and qe["matched"] > 100, "default limit 100")
            qe = await ok(s, "query_trace_events", {"trace_id": "q", "event_type": "task_poll_end", "worker": 1, "limit": 5})
            check(all(e["event"] == "task_poll_end" and e["worker"] == 1 for e in qe["events"]), f"{qe}")
            t = qe["events"][0]["task_id"]
            span = await ok(s, "query_trace_events", {"trace_id": "q", "start_ns": 100_000_000, "end_ns": 200_000_000, "limit": 100000})
            check(span["matched"] > 0 and all(100_000_000 <= e["ts_ns"] <= 200_000_000 for e in span["events"]), "time window")
            loc = await ok(s, "query_trace_events", {"trace_id": "q", "spawn_loc": "quickstart.rs:206", "event_type": "task_spawn", "limit": 3})
            check(loc["matched"] > 0 and all("quickstart.rs:206" in e["spawn_loc"] for e in loc["events"]), f"{loc}")

            # A task's timeline.
            tl = await ok(s, "get_task_timeline", {"trace_id": "q", "task_id": t})
            ev = [e["event"] for e in tl["events"]]
            check("task_poll_start" in ev and "task_poll_end" in ev, f"timeline: {ev}")
            check(all(e["task_id"] == t for e in tl["events"]), "timeline of one task")
            ts = [e["ts_ns"] for e in tl["events"]]
            check(ts == sorted(ts), "timeline in order")

            # A window, as `runtrace top --once --json` (issue 38).
            wi = await ok(s, "get_window", {"trace_id": "q"})
            # 5 s, or the recording's length when shorter (it begins there).
            check(wi["mode"] == "replay" and abs(wi["window_s"] - min(5, wi["length_s"])) < 1e-3, f"window: {wi['mode']} {wi['window_s']} of {wi['length_s']}")
            check(abs(wi["at_s"] - wi["length_s"]) < 1e-6, "ends at the recording's end by default")
            check(len(wi["workers"]) > 0 and len(wi["spawn_locations"]) > 0, "workers and locations")
            wa = await ok(s, "get_window", {"trace_id": "q", "at": 0.5, "window": 0.25})
            check(abs(wa["at_s"] - 0.5) < 1e-3 and abs(wa["window_s"] - 0.25) < 1e-3, f"at: {wa['at_s']} {wa['window_s']}")
            await err(s, "get_window", {"trace_id": "q", "window": 0}, "window", "0.1")
            await err(s, "get_window", {"trace_id": "q", "at": -1}, "at", "seconds")
            await err(s, "get_window", {"trace_id": "q", "at": "soon"}, "at")

            # Error paths: the server answers with tool errors and keeps going.
            await err(s, "get_trace_summary", {"trace_id": "nope"}, 'unknown trace_id "nope"', "q")
            await err(s, "load_trace", {"file_path": "/no/such/recording", "trace_id": "x"}, "/no/such/recording", "cannot open")
            await err(s, "load_trace", {"trace_id": "x"}, "file_path")
            await err(s, "detect_outliers", {"trace_id": "q", "method": "zscore"}, "zscore", "iqr")
            await err(s, "detect_outliers", {"trace_id": "q", "category": "disk"}, "disk")
            await err(s, "query_trace_events", {"trace_id": "q", "event_type": "poll"}, "poll", "task_poll_start")
            await err(s, "query_trace_events", {"trace_id": "q", "limit": "many"}, "limit")
            await err(s, "get_task_timeline", {"trace_id": "q", "task_id": 999999999}, "999999999")
            await err(s, "get_task_timeline", {"trace_id": "q"}, "task_id")
            await ok(s, "unload_trace", {"trace_id": "d"})
            await err(s, "unload_trace", {"trace_id": "d"}, '"d"')
            await err(s, "run_all_analyzers", {"trace_id": "d"}, '"d"')
            listed = await ok(s, "list_traces", {})
            check({x["trace_id"] for x in listed["traces"]} == {"q", "b", "w"}, "unloaded")
            # Still serving after all the errors.
            again = await ok(s, "get_trace_summary", {"trace_id": "q"})
            check(again["events"] == 10625, "alive")
    print(f"{checks} passed, 0 failed")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
