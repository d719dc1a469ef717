//! `Report::resource_waits`: every tokio resource site waited on, with
//! its waiters, holders, releasers and longest waits (what the MCP tool
//! `get_resource_waits` and the HTML report's Waiting section show).

use runtrace_analyze::{analyze_bytes, Options};
use runtrace_model::synth::{mutex_held_across_await, TraceBuilder};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// Within the histograms' error (1/128 of the value).
fn near(got: u64, want: u64) -> bool {
    got.abs_diff(want) * 128 <= want
}

#[test]
fn the_mutex_site_with_its_holder_waiters_and_longest_waits() {
    let r = analyze_bytes(&mutex_held_across_await(), Options::default());
    assert_eq!(r.resource_waits.len(), 1);
    let s = &r.resource_waits[0];
    assert_eq!(s.label(), "Mutex src/state.rs:4:17");
    assert_eq!((s.resources, s.waits, s.internal), (1, 160, false));
    // Every wait is 35.09 ms (the fixture's docs).
    assert_eq!(s.wait_ns_total, 160 * 35_090_000);
    assert!(
        near(s.wait_p50_ns, 35_090_000) && near(s.wait_p99_ns, 35_090_000),
        "{s:?}"
    );
    assert_eq!(s.waiters.len(), 1);
    assert_eq!(s.waiters[0].spawn_loc, "src/req.rs:40:9");
    assert_eq!(s.waiters[0].waits, 160);
    // The holder first: 20 holds of ~40 ms, all across an await, charged
    // with the most waiting; the requests' 160 short holds after it.
    let h = &s.holders[0];
    assert_eq!(h.spawn_loc, "src/sync.rs:12:5");
    assert_eq!((h.holds, h.holds_across_await), (20, 20));
    assert!(near(h.hold_max_ns, 40_019_000), "{h:?}");
    assert_eq!(s.holders[1].spawn_loc, "src/req.rs:40:9");
    assert_eq!(s.holders[1].holds_across_await, 0);
    assert!(h.charged_wait_ns > s.holders[1].charged_wait_ns);
    // Wakes ended them: the holder's 20, the waiters' 140.
    let rel: Vec<(&str, u64)> = s
        .released_by
        .iter()
        .map(|x| (x.spawn_loc.as_str(), x.waits_ended))
        .collect();
    assert_eq!(rel, [("src/req.rs:40:9", 140), ("src/sync.rs:12:5", 20)]);
    // The 8 longest (all equal: the earliest first), with who let each go.
    assert_eq!(s.longest_waits.len(), 8);
    assert_eq!(s.longest_waits[0].task, 100);
    assert_eq!(s.longest_waits[0].wait_ns, 35_090_000);
    assert_eq!(s.longest_waits[0].start_ns, (MS + 5 * MS + 11 * US) as i64);
    assert_eq!(
        s.longest_waits[0].released_by.as_deref(),
        Some("src/sync.rs:12:5")
    );
    assert_eq!(
        s.longest_waits[1].released_by.as_deref(),
        Some("src/req.rs:40:9")
    );
    let j = s.to_json(2);
    assert_eq!(j["waiters_total"], 1);
    assert_eq!(j["holders_total"], 2);
    assert_eq!(j["longest_waits"].as_array().unwrap().len(), 2);
}

#[test]
fn sites_group_resources_and_the_longest_wait_is_kept_among_many() {
    // A oneshot per request (one creation site, 30 resources), each
    // answered by a responder task: one request waits 90 ms, the others
    // 1-29 ms; and a semaphore nobody waits on (no site).
    let mut b = TraceBuilder::new();
    b.location(1, "src/req.rs", 3, 3);
    b.location(2, "src/resp.rs", 7, 7);
    b.location(3, "src/req.rs", 9, 13);
    b.string(5, "Sender|Receiver");
    b.string(6, "Semaphore");
    b.resource_new(1, 0, 999, 6, 3, false);
    b.spawn(2, 0, 1, 0, 2, 0);
    for i in 0..30u64 {
        let (task, res, at) = (100 + i, 10 + i, i * 100 * MS + MS);
        let wait = if i == 17 { 90 * MS } else { (i + 1) * MS };
        b.resource_new(1, at, res, 5, 3, false);
        b.spawn(1, at, task, 0, 1, 0);
        b.poll_start(1, 0, at + US, task, 0, 0);
        b.resource_poll(1, at + 2 * US, task, res, false);
        b.poll_end(1, 0, at + 3 * US, task, false);
        b.poll_start(2, 1, at + 2 * US + wait - US, 1, 0, 0);
        b.wake(2, 1, at + 2 * US + wait - 500, task, 1);
        b.poll_end(2, 1, at + 2 * US + wait - 100, 1, false);
        b.poll_start(1, 0, at + 2 * US + wait - 50, task, 0, 0);
        b.resource_poll(1, at + 2 * US + wait, task, res, true);
        b.poll_end(1, 0, at + 2 * US + wait + US, task, true);
        b.terminate(1, at + 2 * US + wait + 2 * US, task);
    }
    let r = analyze_bytes(&b.finish(), Options::default());
    assert_eq!(
        r.resource_waits.len(),
        1,
        "the semaphore was never waited on"
    );
    let s = &r.resource_waits[0];
    assert_eq!(s.label(), "oneshot src/req.rs:9:13");
    assert_eq!((s.resources, s.waits), (30, 30));
    assert!(s.holders.is_empty(), "nobody holds a oneshot");
    assert_eq!(s.released_by[0].spawn_loc, "src/resp.rs:7:7");
    assert_eq!(s.released_by[0].waits_ended, 30);
    assert_eq!(s.longest_waits[0].task, 117);
    assert_eq!(s.longest_waits[0].wait_ns, 90 * MS);
    assert_eq!(s.longest_waits[1].wait_ns, 30 * MS);
    assert_eq!(s.longest_waits.len(), 8);
    assert_eq!(s.longest_waits[7].wait_ns, 24 * MS);
}
