//! The `jobsctl` command the end-to-end tests run, built by cargo with the tests so it is never
//! stale: the same code as redjob-worker's `jobsctl` binary.

fn main() -> std::process::ExitCode {
    redjob_worker::ops::main()
}
