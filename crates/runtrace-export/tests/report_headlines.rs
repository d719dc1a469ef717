//! The HTML report leads with what to fix first (issue 35 item 7): a list
//! of the findings' headlines before the summary, each linking to its
//! finding; each finding shows its headline and folds its evidence in a
//! `<details>` element (no script).

use runtrace_export::report::html::esc;
use runtrace_model::synth::{mutex_held_across_await, TraceBuilder};

fn page(bytes: Vec<u8>) -> (String, runtrace_analyze::Report) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("trace.0.bin");
    std::fs::write(&input, bytes).unwrap();
    let out = dir.path().join("report.html");
    runtrace_export::report::write(std::slice::from_ref(&input), &out).unwrap();
    let r = runtrace_analyze::analyze_files(&[input], Default::default());
    (std::fs::read_to_string(&out).unwrap(), r)
}

#[test]
fn the_report_leads_with_the_headlines_and_folds_the_evidence() {
    let (p, r) = page(mutex_held_across_await());
    assert!(!r.findings.is_empty());
    let first = p
        .find("<section id=\"fix-first\">")
        .expect("a fix-first list");
    let summary = p.find("<section id=\"summary\">").unwrap();
    assert!(first < summary, "the list leads the page");
    let list = &p[first..first + p[first..].find("</section>").unwrap()];
    assert_eq!(
        list.matches("<li").count(),
        r.findings.len().min(runtrace_analyze::FIX_FIRST)
    );
    for (i, f) in r.findings.iter().enumerate() {
        if i < runtrace_analyze::FIX_FIRST {
            assert!(
                list.contains(&format!(
                    "<a href=\"#finding-{i}\">{}</a>",
                    esc(&f.headline())
                )),
                "{list}"
            );
        }
        // The finding: its headline, then its evidence folded.
        let at = p
            .find(&format!("id=\"finding-{i}\""))
            .expect("the finding's anchor");
        let div = &p[at..at + p[at..].find("</div>").unwrap()];
        let head = div.find("class=\"headline\"").unwrap();
        let fold = div.find("<details><summary>Evidence</summary>").unwrap();
        assert!(head < fold, "{div}");
        assert!(div.contains(&esc(&f.headline_text())), "{div}");
        assert!(div[fold..].contains(&esc(&f.detail)), "{div}");
        assert!(div.ends_with("</details>"), "{div}");
    }
    assert!(!p.contains("<script"), "no script in the page");
}

#[test]
fn no_findings_no_list() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/main.rs", 10, 5);
    b.spawn(7, 1_000, 1, 0, 1, 0);
    b.poll_start(7, 0, 2_000, 1, 0, 0);
    b.poll_end(7, 0, 3_000, 1, true);
    let (p, r) = page(b.finish());
    assert!(r.findings.is_empty());
    assert!(!p.contains("id=\"fix-first\""));
}
