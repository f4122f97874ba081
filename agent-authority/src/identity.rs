//! The authority's identity file: key generation, scope id and root key, created once
//! from the OS random source under the initialization lock.

use std::sync::Mutex;

use crate::envelope::HmacSnapshotAuthority;
use crate::error::{AuthorityError, Reason};
use crate::fsdir::{BoundDir, HeldLock};
use crate::keys::{KEY_BYTES, SCOPE_ID_BYTES, ScopeId, SecretKey, ct_eq, random};
use crate::record::Expect;

/// Bytes in `identity.key`: u64be key generation, scope id, root key.
pub const IDENTITY_BYTES: usize = 8 + SCOPE_ID_BYTES + KEY_BYTES;
/// The key generation a new identity starts at.
pub const INITIAL_KEY_GENERATION: u64 = 1;

const IDENTITY_LOCK: &str = "identity.lock";
const IDENTITY_KEY: &str = "identity.key";

/// BSD `flock` merges locks inside one process, so initialisation also takes this mutex.
static IDENTITY_INIT: Mutex<()> = Mutex::new(());

/// The authority's identity: key generation, public scope and root key.
pub(crate) struct Identity {
    pub(crate) key_generation: u64,
    pub(crate) scope: ScopeId,
    pub(crate) root: SecretKey,
}

impl Identity {
    /// Loads `identity.key`, creating it (under the initialization lock) when absent.
    pub(crate) fn load_or_create(dir: &BoundDir) -> Result<Identity, AuthorityError> {
        let _process = IDENTITY_INIT.lock().unwrap_or_else(|p| p.into_inner());
        let lock =
            HeldLock::take(dir.open_lock(IDENTITY_LOCK)?).map_err(|e| AuthorityError::io(&e))?;
        let identity = match dir.read(IDENTITY_KEY, IDENTITY_BYTES, Reason::IdentityInvalid)? {
            Some(bytes) => Identity::parse(&bytes)?,
            None => {
                let scope: [u8; SCOPE_ID_BYTES] =
                    random().map_err(|_| AuthorityError::new(Reason::Randomness))?;
                let root: [u8; KEY_BYTES] =
                    random().map_err(|_| AuthorityError::new(Reason::Randomness))?;
                let mut bytes = Vec::with_capacity(IDENTITY_BYTES);
                bytes.extend_from_slice(&INITIAL_KEY_GENERATION.to_be_bytes());
                bytes.extend_from_slice(&scope);
                bytes.extend_from_slice(&root);
                // Re-validated before use: a broken random source must not yield a zero key.
                let identity = Identity::parse(&bytes)?;
                dir.write_atomic(IDENTITY_KEY, &bytes, &mut |_| Ok(()))?;
                identity
            }
        };
        drop(lock);
        Ok(identity)
    }

    fn parse(bytes: &[u8]) -> Result<Identity, AuthorityError> {
        let invalid = || AuthorityError::new(Reason::IdentityInvalid);
        if bytes.len() != IDENTITY_BYTES {
            return Err(invalid());
        }
        let key_generation = u64::from_be_bytes(bytes[..8].try_into().map_err(|_| invalid())?);
        let scope: [u8; SCOPE_ID_BYTES] = bytes[8..40].try_into().map_err(|_| invalid())?;
        let root: [u8; KEY_BYTES] = bytes[40..].try_into().map_err(|_| invalid())?;
        if key_generation == 0
            || scope == [0; SCOPE_ID_BYTES]
            || root == [0; KEY_BYTES]
            || ct_eq(&scope, &root)
        {
            return Err(invalid());
        }
        Ok(Identity {
            key_generation,
            scope: ScopeId::from_bytes(scope),
            root: SecretKey::from_bytes(root),
        })
    }

    pub(crate) fn expect<'a>(&'a self, run_id: &'a str) -> Expect<'a> {
        Expect {
            scope: &self.scope,
            key_generation: self.key_generation,
            run_id,
        }
    }

    pub(crate) fn snapshot_authority(
        &self,
        run_id: &str,
        run_generation: u64,
    ) -> HmacSnapshotAuthority {
        let key = self
            .root
            .derive_run_key(&self.scope, run_id, run_generation);
        match HmacSnapshotAuthority::new(self.scope, self.key_generation, key) {
            Ok(authority) => authority,
            // key_generation > 0 was checked when the identity was parsed.
            Err(_) => unreachable!("identity key generation is positive"),
        }
    }
}
