#[runtrace_macros::main(flavor = "single_thread")]
async fn main() {}
