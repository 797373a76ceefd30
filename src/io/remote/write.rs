//! Uploading to a remote dataset: whole files (multipart when large), conditional creates
//! and deletes. The publication order lives with the caller (`Store::publish_staged`).

use object_store::ObjectStoreExt;

use super::{runtime, RemoteStore};
use crate::error::Result;

/// An object's version as a conditional replace names it (its ETag, or the store's version).
#[derive(Clone, Debug)]
pub struct ObjectVersion(object_store::UpdateVersion);

impl RemoteStore {
    /// Uploads the local file `src` as `name`: one `PUT` when small, a multipart upload (parts
    /// of `MULTIPART_PART` bytes, several in flight) otherwise. Either way the object appears
    /// whole or not at all; a failed multipart upload is aborted so no parts linger.
    pub fn put_file(&self, name: &str, src: &std::path::Path) -> Result<()> {
        use crate::error::IoContext;
        use object_store::{PutPayload, WriteMultipart};
        use std::io::Read;
        let client = self.writer()?;
        let key = self.key(name);
        let mut file = std::fs::File::open(src).at(src)?;
        let len = file.metadata().at(src)?.len();
        if len <= MULTIPART_PART as u64 {
            let mut buf = Vec::with_capacity(len as usize);
            file.read_to_end(&mut buf).at(src)?;
            return runtime::block_on(
                async move { client.put(&key, PutPayload::from(buf)).await },
            )?
            .map(|_| ())
            .map_err(|e| self.error(name, e));
        }
        let (rt, _) = runtime::runtime()?;
        // `write` spawns part uploads onto the runtime, so it must run inside its context.
        let _inside = rt.enter();
        let upload = rt
            .block_on(async { client.put_multipart(&key).await })
            .map_err(|e| self.error(name, e))?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, MULTIPART_PART);
        let mut buf = vec![0u8; MULTIPART_PART];
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    let _ = rt.block_on(writer.abort());
                    return Err(crate::error::Error::io(src, e));
                }
            };
            // Bounds the parts buffered in memory while earlier ones upload.
            if let Err(e) = rt.block_on(writer.wait_for_capacity(4)) {
                return Err(self.error(name, e));
            }
            writer.write(&buf[..n]);
        }
        rt.block_on(writer.finish())
            .map(|_| ())
            .map_err(|e| self.error(name, e))
    }

    /// Writes `bytes` as `name` only if no object of that name exists; false if one does.
    pub fn put_new(&self, name: &str, bytes: Vec<u8>) -> Result<bool> {
        use object_store::{PutMode, PutOptions, PutPayload};
        let client = self.writer()?;
        let key = self.key(name);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        let got = runtime::block_on(async move {
            client.put_opts(&key, PutPayload::from(bytes), opts).await
        })?;
        match got {
            Ok(_) => Ok(true),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(false),
            // Plain HTTP (WebDAV) stores cannot create only-if-absent; publishing there could
            // replace another writer's chunk, so it is refused rather than done unconditionally.
            Err(object_store::Error::NotImplemented { .. }) => Err(crate::error::Error::Remote {
                url: self.url_of(name),
                kind: crate::error::RemoteKind::Config,
                msg: "this store cannot create an object only if none has its name, which \
                      publishing a chunk needs (another writer's chunk could be replaced): \
                      write to S3, GCS or Azure, or to a local folder and copy it"
                    .into(),
            }),
            Err(e) => Err(self.error(name, e)),
        }
    }

    /// `name`'s bytes and the version a [`RemoteStore::put_replacing`] names, or None when it
    /// does not exist.
    pub fn read_versioned(&self, name: &str) -> Result<Option<(Vec<u8>, ObjectVersion)>> {
        let client = self.client()?;
        let key = self.key(name);
        let got = runtime::block_on(super::retry::retrying(self.policy(), || {
            let (client, key) = (client.clone(), key.clone());
            async move {
                let got = client.get(&key).await?;
                let version = object_store::UpdateVersion {
                    e_tag: got.meta.e_tag.clone(),
                    version: got.meta.version.clone(),
                };
                Ok((got.bytes().await?, version))
            }
        }))?;
        match got {
            Ok((bytes, v)) => Ok(Some((bytes.to_vec(), ObjectVersion(v)))),
            Err(f) => match self.failed(name, f) {
                crate::error::Error::Remote {
                    kind: crate::error::RemoteKind::NotFound,
                    ..
                } => Ok(None),
                e => Err(e),
            },
        }
    }

    /// Writes `name` only if it is still at `expected` (`If-Match`), or only if it does not
    /// exist when `expected` is None (`If-None-Match: *`); false when another writer changed
    /// it first. A store that cannot condition a replace (plain HTTP) is written
    /// unconditionally: callers use this for hints only, which a lost race makes stale, never
    /// wrong.
    pub fn put_replacing(
        &self,
        name: &str,
        bytes: Vec<u8>,
        expected: Option<&ObjectVersion>,
    ) -> Result<bool> {
        use object_store::{PutMode, PutOptions, PutPayload};
        let Some(expected) = expected else {
            return self.put_new(name, bytes);
        };
        let client = self.writer()?;
        let key = self.key(name);
        let opts = PutOptions {
            mode: PutMode::Update(expected.0.clone()),
            ..Default::default()
        };
        let payload = PutPayload::from(bytes);
        let again = payload.clone();
        let got = runtime::block_on({
            let (client, key) = (client.clone(), key.clone());
            async move { client.put_opts(&key, payload, opts).await }
        })?;
        match got {
            Ok(_) => Ok(true),
            Err(
                object_store::Error::Precondition { .. }
                | object_store::Error::AlreadyExists { .. }
                | object_store::Error::NotFound { .. },
            ) => Ok(false),
            Err(object_store::Error::NotImplemented { .. }) => {
                runtime::block_on(async move { client.put(&key, again).await })?
                    .map(|_| true)
                    .map_err(|e| self.error(name, e))
            }
            Err(e) => Err(self.error(name, e)),
        }
    }

    /// Deletes `name` (no error if it does not exist).
    pub fn delete(&self, name: &str) -> Result<()> {
        let client = self.writer()?;
        let key = self.key(name);
        match runtime::block_on(async move { client.delete(&key).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error(name, e)),
        }
    }
}

/// Part size of multipart uploads (S3's minimum is 5 MiB).
pub const MULTIPART_PART: usize = 16 << 20;
