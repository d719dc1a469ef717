#[runtrace_macros::main(crate = "tokio")]
async fn main() {}
