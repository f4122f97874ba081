//! Directory and file trust: the bound directory survives path substitution; symlinks,
//! hard links, loose modes and writable ancestors without the sticky bit are refused.
//! Everything happens under private temporary directories (`/tmp` itself is sticky).

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use agent_authority::{ErrorKind, Phase, Reason, Store, StoreOptions};
use support::{TempDir, open, state_file, suspended};

fn try_open(dir: &Path) -> Result<Store, agent_authority::AuthorityError> {
    Store::open(StoreOptions::new().directory(dir))
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn the_store_is_created_0700_with_0600_files() {
    let temp = TempDir::new("modes");
    let dir = temp.path().join("a/b/store");
    let store = open(&dir);
    suspended(&store, "run-1");
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&temp.path().join("a")), 0o700);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
    // No temp file is left behind by successful writes.
    assert!(
        std::fs::read_dir(&dir)
            .unwrap()
            .all(|e| { !e.unwrap().file_name().to_string_lossy().ends_with(".tmp") })
    );
}

#[test]
fn a_path_substituted_after_binding_has_no_effect() {
    let temp = TempDir::new("substitute");
    let original = temp.path().join("a");
    std::fs::create_dir(&original).unwrap();
    let store = open(&original.join("store"));
    // Swap the path: the bound store moves away, an attacker's store takes its name.
    std::fs::rename(&original, temp.path().join("moved")).unwrap();
    let planted = open(&original.join("store"));
    drop(planted);
    let mut run = store.start("run-1").unwrap();
    run.close().unwrap();
    assert!(state_file(&temp.path().join("moved/store"), "run-1").exists());
    assert!(!state_file(&original.join("store"), "run-1").exists());
    assert_eq!(
        store.inspect("run-1").unwrap().unwrap().phase,
        Phase::Active
    );
}

#[test]
fn symlinked_directories_and_files_are_refused() {
    let temp = TempDir::new("symlink");
    let real = temp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, temp.path().join("link")).unwrap();
    let error = try_open(&temp.path().join("link/store")).unwrap_err();
    assert_eq!(error.reason(), Reason::Untrusted);
    // The leaf itself a symlink.
    let target = temp.path().join("target");
    drop(open(&target));
    std::os::unix::fs::symlink(&target, temp.path().join("leaf")).unwrap();
    assert_eq!(
        try_open(&temp.path().join("leaf")).unwrap_err().reason(),
        Reason::Untrusted
    );

    // A symlinked record file.
    let dir = temp.path().join("store");
    let store = open(&dir);
    suspended(&store, "run-1");
    let file = state_file(&dir, "run-1");
    let aside = temp.path().join("aside.state");
    std::fs::rename(&file, &aside).unwrap();
    std::os::unix::fs::symlink(&aside, &file).unwrap();
    let error = store.inspect("run-1").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert_eq!(error.reason(), Reason::Untrusted);
    // A symlinked identity file.
    std::fs::rename(dir.join("identity.key"), temp.path().join("key")).unwrap();
    std::os::unix::fs::symlink(temp.path().join("key"), dir.join("identity.key")).unwrap();
    assert_eq!(try_open(&dir).unwrap_err().reason(), Reason::Untrusted);
}

#[test]
fn hard_linked_files_are_refused() {
    let temp = TempDir::new("hardlink");
    let dir = temp.store_dir();
    let store = open(&dir);
    let envelope = suspended(&store, "run-1");
    let file = state_file(&dir, "run-1");
    std::fs::hard_link(&file, temp.path().join("copy")).unwrap();
    assert_eq!(
        store.inspect("run-1").unwrap_err().reason(),
        Reason::Untrusted
    );
    assert_eq!(
        store.prepare_import(&envelope).unwrap_err().reason(),
        Reason::Untrusted
    );
    std::fs::remove_file(temp.path().join("copy")).unwrap();
    assert!(store.inspect("run-1").is_ok());
    std::fs::hard_link(dir.join("identity.key"), temp.path().join("key")).unwrap();
    assert_eq!(try_open(&dir).unwrap_err().reason(), Reason::Untrusted);
}

#[test]
fn loosely_permissioned_files_and_directories_are_refused() {
    let temp = TempDir::new("loose");
    let dir = temp.store_dir();
    let store = open(&dir);
    suspended(&store, "run-1");
    let file = state_file(&dir, "run-1");
    chmod(&file, 0o644);
    assert_eq!(
        store.inspect("run-1").unwrap_err().reason(),
        Reason::Untrusted
    );
    // A write over a loose destination is refused too.
    assert_eq!(
        store.start("run-1").unwrap_err().reason(),
        Reason::Untrusted
    );
    chmod(&file, 0o600);
    assert!(store.inspect("run-1").is_ok());
    chmod(&dir.join("identity.key"), 0o644);
    assert_eq!(try_open(&dir).unwrap_err().reason(), Reason::Untrusted);
    chmod(&dir.join("identity.key"), 0o600);
    chmod(&dir, 0o755);
    assert_eq!(try_open(&dir).unwrap_err().reason(), Reason::Untrusted);
    chmod(&dir, 0o700);
    assert!(try_open(&dir).is_ok());
}

#[test]
fn a_writable_ancestor_needs_the_sticky_bit() {
    let temp = TempDir::new("ancestor");
    let shared = temp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    chmod(&shared, 0o777);
    let error = try_open(&shared.join("store")).unwrap_err();
    assert_eq!(error.reason(), Reason::Untrusted);
    assert!(
        !shared.join("store").exists(),
        "nothing is created below it"
    );
    chmod(&shared, 0o770);
    assert_eq!(
        try_open(&shared.join("store")).unwrap_err().reason(),
        Reason::Untrusted
    );
    chmod(&shared, 0o1777);
    let store = open(&shared.join("store"));
    suspended(&store, "run-1");
    // Reopening after the ancestor lost its sticky bit is refused (no rollback through it).
    chmod(&shared, 0o777);
    assert_eq!(
        try_open(&shared.join("store")).unwrap_err().reason(),
        Reason::Untrusted
    );
}

#[test]
fn relative_and_dotted_paths_are_configuration_errors() {
    for path in ["relative/store", "/tmp/../tmp/store"] {
        let error = try_open(Path::new(path)).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::State, "{path}");
        assert_eq!(error.reason(), Reason::Configuration);
    }
}

#[test]
fn the_default_directory_is_under_the_state_home() {
    // Read only: nothing is created at the default location here.
    let absolute = |name| std::env::var_os(name).is_some_and(|v| Path::new(&v).is_absolute());
    match agent_authority::default_directory() {
        Ok(path) => {
            assert!(path.ends_with(agent_authority::DEFAULT_SUBDIRECTORY));
            assert!(path.is_absolute());
            let base = if absolute("XDG_STATE_HOME") {
                std::path::PathBuf::from(std::env::var_os("XDG_STATE_HOME").unwrap())
            } else {
                Path::new(&std::env::var_os("HOME").unwrap()).join(".local/state")
            };
            assert_eq!(path, base.join(agent_authority::DEFAULT_SUBDIRECTORY));
        }
        Err(error) => {
            assert!(!absolute("XDG_STATE_HOME") && !absolute("HOME"));
            assert_eq!(error.reason(), Reason::Configuration);
        }
    }
}
