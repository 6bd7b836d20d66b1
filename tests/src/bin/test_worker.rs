//! The worker the end-to-end tests run: the example jobs, built by cargo with the tests so it
//! is never stale.

fn main() -> std::process::ExitCode {
    examples::link();
    jobs_worker::main()
}
