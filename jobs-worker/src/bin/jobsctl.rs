//! `jobsctl`: operate the Redis queues from a terminal (see `docs/operations.md`).

fn main() -> std::process::ExitCode {
    jobs_worker::ops::main()
}
