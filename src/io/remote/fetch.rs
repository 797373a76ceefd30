//! One range request, exactly: the bytes of a range of an object, retried on transient
//! faults, checked to be the bytes asked for, and cut from the whole object when a server
//! ignores `Range`. What reads (`read`) and read-ahead (`readahead`) both send.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use super::retry::{self, retrying, Failure, Policy};

/// Bytes `range` of `key` exactly, retried by `policy` (see [`get_exact`]).
pub(super) async fn fetch_range(
    client: Arc<dyn ObjectStore>,
    key: ObjectPath,
    range: Range<u64>,
    size: Option<u64>,
    policy: Policy,
) -> Result<Bytes, Failure> {
    retrying(policy, || {
        let (client, key, range) = (client.clone(), key.clone(), range.clone());
        async move { get_exact(client.as_ref(), &key, range, size).await }
    })
    .await
}

/// One attempt at bytes `range` of `key`, checked to be exactly those bytes: a body cut short
/// is a transient fault (retried, never returned). A server that ignores `Range` (answers
/// 200 with the whole object) is asked for the whole object, and the range is cut from the
/// body as it streams past (see [`slice_of_whole`]).
pub(super) async fn get_exact(
    client: &dyn ObjectStore,
    key: &ObjectPath,
    range: Range<u64>,
    size: Option<u64>,
) -> object_store::Result<Bytes> {
    let want = range.end - range.start;
    match client.get_range(key, range.clone()).await {
        Ok(b) if b.len() as u64 == want => Ok(b),
        Ok(b) => Err(retry::transient(format!(
            "short body: {} of {want} bytes",
            b.len()
        ))),
        Err(e) if ignores_range(&e) => slice_of_whole(client, key, range, size).await,
        Err(e) => Err(e),
    }
}

/// True for the error `object_store` gives when a server answered a range request with the
/// whole object: "non-partial response" (S3, GCS, Azure), "Range request not supported"
/// (HTTP). The crates' error types are private, so the text is matched.
fn ignores_range(e: &object_store::Error) -> bool {
    let text = e.to_string();
    text.contains("non-partial response") || text.contains("Range request not supported")
}

/// Bytes `range` of `key` out of a request for the whole object: only the range is kept
/// (the rest of the body streams past, and the request is dropped once the range is in), so
/// memory stays bounded by the range. The body must be the size the listing said (`size`),
/// when it said one, so that a different object is never cut into.
async fn slice_of_whole(
    client: &dyn ObjectStore,
    key: &ObjectPath,
    range: Range<u64>,
    size: Option<u64>,
) -> object_store::Result<Bytes> {
    let got = client.get(key).await?;
    let whole = got.meta.size;
    if let Some(listed) = size.filter(|&s| s != whole) {
        return Err(retry::permanent(format!(
            "the server ignores Range and sent the whole object, {whole} bytes, where the \
             listing said {listed}: the object changed"
        )));
    }
    if range.end > whole {
        return Err(retry::permanent(format!(
            "bytes {}..{} asked of an object of {whole} bytes",
            range.start, range.end
        )));
    }
    let want = (range.end - range.start) as usize;
    let mut out = Vec::new();
    out.try_reserve_exact(want)
        .map_err(|_| retry::permanent(format!("cannot allocate {want} bytes for a range")))?;
    let mut at = 0u64; // offset in the object of the next body byte
    let mut body = got.into_stream();
    while at < range.end {
        let Some(piece) = body.next().await else {
            break;
        };
        let piece = piece?;
        let end = at + piece.len() as u64;
        let from = range.start.clamp(at, end) - at;
        let to = range.end.clamp(at, end) - at;
        out.extend_from_slice(&piece[from as usize..to as usize]);
        at = end;
    }
    if out.len() != want {
        return Err(retry::transient(format!(
            "the whole-object body ended at byte {at}, before the range {}..{} was in",
            range.start, range.end
        )));
    }
    Ok(Bytes::from(out))
}
