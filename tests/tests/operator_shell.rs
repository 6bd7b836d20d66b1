//! The operators' command as a person meets it: installed with `cargo install --path
//! jobs-worker`, its folder on PATH, and typed at a shell prompt. `jobs`, the name it had first,
//! is a builtin of every POSIX shell, which wins over any program on PATH; these tests fail
//! again if the command ever takes a name a shell keeps for itself.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use tests::scenarios::failed_jobs_on;
use tests::TestRedis;

const TEST_WORKER: &str = env!("CARGO_BIN_EXE_test_worker");

/// The operators' command, as the README spells it.
const COMMAND: &str = "jobsctl";

/// Installs the operators' command as the README says (`cargo install --path jobs-worker`),
/// into a folder of the build directory, once per test run, and returns that folder's `bin`.
/// A debug build in the workspace's target directory reuses what the test build compiled.
fn installed_bin_dir() -> &'static Path {
    static BIN_DIR: OnceLock<PathBuf> = OnceLock::new();
    BIN_DIR.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace.join("target"));
        let root = target.join("operator-install");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(workspace)
            .args([
                "install",
                "--quiet",
                "--debug",
                "--locked",
                "--offline",
                "--force",
            ])
            .arg("--path")
            .arg(workspace.join("jobs-worker"))
            .arg("--root")
            .arg(&root)
            .arg("--target-dir")
            .arg(&target)
            .status()
            .expect("cannot run cargo install");
        assert!(status.success(), "cargo install --path jobs-worker failed");
        root.join("bin")
    })
}

/// Runs `line` in `shell -c`, with the installed command's folder first on PATH and REDIS_URL
/// naming the test server, as an operator's shell session would have them.
fn typed_in(shell: &str, line: &str, redis: &TestRedis) -> std::process::Output {
    let path = std::env::var("PATH").unwrap_or_default();
    Command::new(shell)
        .args(["-c", line])
        .env("PATH", format!("{}:{path}", installed_bin_dir().display()))
        .env("REDIS_URL", redis.url())
        .output()
        .unwrap_or_else(|err| panic!("cannot start {shell}: {err}"))
}

#[tokio::test]
async fn the_failed_jobs_listing_typed_in_bash_and_in_sh_is_the_commands_own() {
    let redis = TestRedis::start();
    let uuids = failed_jobs_on(TEST_WORKER, &redis, &["mail"]).await;

    // Debian's `sh` is dash; both resolve builtins before PATH.
    for shell in ["bash", "sh"] {
        let ran = typed_in(shell, &format!("{COMMAND} failed"), &redis);
        let stdout = String::from_utf8_lossy(&ran.stdout);
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(0), "{shell}: {stdout}{stderr}");
        assert!(stdout.starts_with("#  UUID"), "{shell}: {stdout}{stderr}");
        assert!(stdout.contains(&uuids[0]), "{shell}: {stdout}{stderr}");
        assert_eq!(stderr, "", "{shell}");

        let kind = typed_in(shell, &format!("command -v {COMMAND}"), &redis);
        let found = String::from_utf8_lossy(&kind.stdout);
        assert_eq!(
            found.trim(),
            installed_bin_dir().join(COMMAND).display().to_string(),
            "{shell} resolves {COMMAND} to a program on PATH, not to a builtin"
        );
    }
}
