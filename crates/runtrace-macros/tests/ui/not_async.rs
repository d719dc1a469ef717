#[runtrace_macros::main]
fn main() {}
