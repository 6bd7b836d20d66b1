//! The worker for the example jobs: `cargo run --bin worker -- --queue high,default --tries 3`.

fn main() -> std::process::ExitCode {
    examples::link();
    jobs_worker::main()
}
