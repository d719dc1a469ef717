#[runtrace_macros::main(flavour = "current_thread")]
async fn main() {}
