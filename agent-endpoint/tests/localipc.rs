//! The Unix listener and dial rules of docs/transport.md ("The socket"), each refusal on its own.

mod support;

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::os::unix::net::UnixListener;

use agent_endpoint::localipc::{self, IpcError, MAX_ADDRESS_BYTES, MAX_BASE_NAME};
use support::{TempDir, on_path, skip_or_fail};

#[test]
fn listener_is_private_connectable_and_removed_on_close() {
    let temp = TempDir::new("lpriv");
    let address = temp.path().join("agent.sock");
    let listener = localipc::listen(&address).unwrap();
    let meta = std::fs::symlink_metadata(&address).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert_eq!(meta.uid(), localipc::effective_uid());
    let mut client = localipc::dial(&address).unwrap();
    let mut served = listener.accept().unwrap();
    client.write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    served.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
    listener.close();
    assert!(std::fs::symlink_metadata(&address).is_err());
    assert_eq!(localipc::dial(&address).unwrap_err(), IpcError::NotFound);
}

#[test]
fn address_rules_are_checked_before_anything_is_touched() {
    let temp = TempDir::new("laddr");
    let long_dir = temp.path().join("d".repeat(MAX_ADDRESS_BYTES));
    for bad in [
        "relative.sock".to_owned(),
        format!("{}/./agent.sock", temp.path().display()),
        format!("{}/../agent.sock", temp.path().display()),
        format!("{}//agent.sock", temp.path().display()),
        format!("{}/agent.sock/", temp.path().display()),
        format!("{}/bad name.sock", temp.path().display()),
        format!(
            "{}/{}",
            temp.path().display(),
            "a".repeat(MAX_BASE_NAME + 1)
        ),
        format!("{}/x.sock", long_dir.display()),
        "/agent.sock".to_owned(),
    ] {
        let path = std::path::PathBuf::from(&bad);
        assert_eq!(
            localipc::listen(&path).unwrap_err(),
            IpcError::InvalidAddress,
            "{bad}"
        );
        assert_eq!(
            localipc::dial(&path).unwrap_err(),
            IpcError::InvalidAddress,
            "{bad}"
        );
    }
    // Exactly at the bound is accepted by the address rule.
    let prefix = format!("{}/", temp.path().display());
    let at_bound = format!("{prefix}{}", "s".repeat(MAX_ADDRESS_BYTES - prefix.len()));
    assert_eq!(at_bound.len(), MAX_ADDRESS_BYTES);
    assert!(localipc::validate_address(std::path::Path::new(&at_bound)).is_ok());
    let past = format!("{at_bound}s");
    assert_eq!(
        localipc::validate_address(std::path::Path::new(&past)),
        Err(IpcError::InvalidAddress)
    );
}

#[test]
fn parent_must_be_exactly_0700_and_ours() {
    let temp = TempDir::new("lmode");
    for mode in [0o750, 0o755, 0o711, 0o1700, 0o500] {
        let dir = temp.child(&format!("m{mode:o}"), mode);
        assert_eq!(
            localipc::listen(&dir.join("a.sock")).unwrap_err(),
            IpcError::Unsafe,
            "{mode:o}"
        );
    }
    let foreign = temp.child("foreign", 0o700);
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
    assert_eq!(
        localipc::listen(&foreign.join("a.sock")).unwrap_err(),
        IpcError::Unsafe
    );
}

#[test]
fn hostile_ancestry_is_refused() {
    let temp = TempDir::new("lanc");
    // A world-writable ancestor without the sticky bit.
    let open = temp.child("open", 0o777);
    let inner = open.join("inner");
    std::fs::create_dir(&inner).unwrap();
    std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(
        localipc::listen(&inner.join("a.sock")).unwrap_err(),
        IpcError::Unsafe
    );
    // A sticky shared ancestor whose child is owned by an untrusted user.
    let sticky = temp.child("sticky", 0o1777);
    let theirs = sticky.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    assert_eq!(
        localipc::listen(&theirs.join("a.sock")).unwrap_err(),
        IpcError::Unsafe
    );
    // A sticky shared ancestor with our own child is fine.
    let ours = sticky.join("ours");
    std::fs::create_dir(&ours).unwrap();
    std::fs::set_permissions(&ours, std::fs::Permissions::from_mode(0o700)).unwrap();
    localipc::listen(&ours.join("a.sock")).unwrap().close();
    // An ancestor owned by an untrusted user.
    let owned = temp.child("owned", 0o755);
    std::os::unix::fs::chown(&owned, Some(65534), Some(65534)).unwrap();
    let below = owned.join("below");
    std::fs::create_dir(&below).unwrap();
    std::fs::set_permissions(&below, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(
        localipc::listen(&below.join("a.sock")).unwrap_err(),
        IpcError::Unsafe
    );
    // A symlinked component is never followed.
    let real = temp.child("real", 0o700);
    let link = temp.path().join("link");
    symlink(&real, &link).unwrap();
    assert_eq!(
        localipc::listen(&link.join("a.sock")).unwrap_err(),
        IpcError::Unsafe
    );
    assert_eq!(
        localipc::dial(&link.join("a.sock")).unwrap_err(),
        IpcError::Unsafe
    );
}

#[test]
fn removes_only_an_owned_private_stale_socket() {
    let temp = TempDir::new("lstale");
    let address = temp.path().join("agent.sock");
    // A stale socket: bound, then its listener dropped without unlinking.
    drop(UnixListener::bind(&address).unwrap());
    std::fs::set_permissions(&address, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(localipc::dial(&address).unwrap_err(), IpcError::NotFound);
    let listener = localipc::listen(&address).unwrap();
    // The stale node was replaced by a live listener.
    assert!(localipc::dial(&address).is_ok());
    listener.close();

    // A stale socket with group or other bits is not ours to remove.
    drop(UnixListener::bind(&address).unwrap());
    std::fs::set_permissions(&address, std::fs::Permissions::from_mode(0o660)).unwrap();
    assert_eq!(localipc::listen(&address).unwrap_err(), IpcError::Unsafe);
    assert!(std::fs::symlink_metadata(&address).is_ok());
    std::fs::remove_file(&address).unwrap();

    // A stale socket owned by someone else is not removed either.
    drop(UnixListener::bind(&address).unwrap());
    std::fs::set_permissions(&address, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::lchown(&address, Some(65534), Some(65534)).unwrap();
    assert_eq!(localipc::listen(&address).unwrap_err(), IpcError::Unsafe);
    assert!(std::fs::symlink_metadata(&address).is_ok());
}

#[test]
fn preserves_live_and_non_socket_endpoints() {
    let temp = TempDir::new("llive");
    let address = temp.path().join("agent.sock");
    let first = localipc::listen(&address).unwrap();
    assert_eq!(localipc::listen(&address).unwrap_err(), IpcError::InUse);
    assert!(localipc::dial(&address).is_ok());
    first.close();

    std::fs::write(&address, b"not a socket").unwrap();
    std::fs::set_permissions(&address, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(localipc::listen(&address).unwrap_err(), IpcError::Unsafe);
    assert_eq!(localipc::dial(&address).unwrap_err(), IpcError::Unsafe);
    assert_eq!(std::fs::read(&address).unwrap(), b"not a socket");
    std::fs::remove_file(&address).unwrap();

    symlink("/dev/null", &address).unwrap();
    assert_eq!(localipc::listen(&address).unwrap_err(), IpcError::Unsafe);
    assert!(
        std::fs::symlink_metadata(&address)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn close_preserves_a_replacement_socket() {
    let temp = TempDir::new("lrepl");
    let address = temp.path().join("agent.sock");
    let listener = localipc::listen(&address).unwrap();
    std::fs::remove_file(&address).unwrap();
    let replacement = UnixListener::bind(&address).unwrap();
    let ino = std::fs::symlink_metadata(&address).unwrap().ino();
    listener.close();
    assert_eq!(std::fs::symlink_metadata(&address).unwrap().ino(), ino);
    drop(replacement);
}

#[test]
fn another_user_cannot_reach_a_socket_in_the_private_directory() {
    // A real child process running as nobody tries to connect: the 0700 directory
    // keeps it out even though it knows the address.
    let temp = TempDir::new("luid");
    std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let dir = temp.child("scope", 0o700);
    let address = dir.join("agent.sock");
    let listener = localipc::listen(&address).unwrap();
    if localipc::effective_uid() != 0 {
        eprintln!("skipped: needs root to spawn a process as another uid");
        listener.close();
        return;
    }
    // Looked up here: as nobody, a search of root's PATH fails on its private directories
    // with "permission denied", not "not found".
    if !on_path("python3") {
        skip_or_fail("python3");
        listener.close();
        return;
    }
    let script = format!(
        "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect('{}')\n print('connected')\nexcept PermissionError:\n print('denied')\n",
        address.display()
    );
    use std::os::unix::process::CommandExt;
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg(&script)
        .uid(65534)
        .gid(65534)
        .output();
    let output = output.unwrap_or_else(|e| panic!("spawn: {e}"));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "denied");
    listener.close();
}
