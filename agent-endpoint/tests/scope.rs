//! The per-user scope (docs/transport.md, "The scope and the endpoint files"), with injected roots.

mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use agent_endpoint::UserScope;
use agent_endpoint::localipc::effective_uid;
use support::TempDir;

#[test]
fn safe_xdg_runtime_dir_is_used() {
    let temp = TempDir::new("cxdg");
    let xdg = temp.child("run", 0o700);
    let tmp = temp.child("tmp", 0o1777);
    let scope = UserScope::resolve(Some(&xdg), &tmp).unwrap();
    assert_eq!(scope.dir(), xdg.join("spice-agent"));
    assert_eq!(scope.address(), xdg.join("spice-agent/agent.sock"));
    let meta = std::fs::metadata(scope.dir()).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o700);
}

#[test]
fn falls_back_from_unsafe_xdg() {
    let temp = TempDir::new("cunsafe");
    let tmp = temp.child("tmp", 0o1777);
    let expected = tmp.join(format!("spice-agent-{}", effective_uid()));
    let wide = temp.child("wide", 0o755);
    let link = temp.path().join("link");
    std::os::unix::fs::symlink(temp.child("real", 0o700), &link).unwrap();
    for xdg in [wide.clone(), link, std::path::PathBuf::from("relative")] {
        let scope = UserScope::resolve(Some(&xdg), &tmp).unwrap();
        assert_eq!(scope.dir(), expected, "{}", xdg.display());
    }
    let scope = UserScope::resolve(None, &tmp).unwrap();
    assert_eq!(scope.address(), expected.join("agent.sock"));
}

#[test]
fn falls_back_when_xdg_socket_path_is_too_long() {
    let temp = TempDir::new("clong");
    let tmp = temp.child("tmp", 0o1777);
    let mut xdg = temp.path().to_path_buf();
    while xdg.join("spice-agent/agent.sock").as_os_str().len() <= 100 {
        xdg = xdg.join("dddddddddd");
    }
    std::fs::create_dir_all(&xdg).unwrap();
    std::fs::set_permissions(&xdg, std::fs::Permissions::from_mode(0o700)).unwrap();
    let scope = UserScope::resolve(Some(&xdg), &tmp).unwrap();
    assert_eq!(
        scope.dir(),
        tmp.join(format!("spice-agent-{}", effective_uid()))
    );
}

#[test]
fn temp_root_must_be_sticky_and_an_existing_scope_must_be_private() {
    let temp = TempDir::new("ctmp");
    let not_sticky = temp.child("tmp", 0o777);
    assert!(UserScope::resolve(None, &not_sticky).is_err());
    let tmp = temp.child("tmp2", 0o1777);
    let existing = tmp.join(format!("spice-agent-{}", effective_uid()));
    std::fs::create_dir(&existing).unwrap();
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(UserScope::resolve(None, &tmp).is_err());
}
