//! `jobsctl`: operate the Redis queues from a terminal (see `docs/operations.md`).

fn main() -> std::process::ExitCode {
    redjob_worker::ops::main()
}
