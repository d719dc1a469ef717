#[runtrace_macros::test(start_paused = yes)]
async fn a_test() {}

fn main() {}
