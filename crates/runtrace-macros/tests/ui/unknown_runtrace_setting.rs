#[runtrace_macros::main(runtrace(paht = "traces/app"))]
async fn main() {}
