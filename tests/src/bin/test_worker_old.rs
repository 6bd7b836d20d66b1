//! The worker of the release before `test_worker`'s: the example jobs without `new_kind`, for
//! the tests of a rolling deploy, where old and new workers run side by side.

fn main() -> std::process::ExitCode {
    examples::link();
    redjob_worker::main()
}
