//! The worker for the example jobs: `cargo run --bin worker -- --queue high,default --tries 3`;
//! with `--schedule` it also keeps the example schedules (`examples::define_schedules`).

fn main() -> std::process::ExitCode {
    examples::link();
    if let Err(err) = examples::define_schedules() {
        eprintln!("worker: {err}");
        return std::process::ExitCode::FAILURE;
    }
    redjob_worker::main()
}
