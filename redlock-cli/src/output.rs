//! Generated text (completion scripts, manual pages) written out.

use std::io::{ErrorKind, Write as _};
use std::path::Path;

use crate::exit::{Exit, IO_ERROR};

/// Writes `bytes` to stdout. A reader that closed the pipe early (`redlock
/// man | head`) is not an error.
pub(crate) fn to_stdout(bytes: &[u8]) -> Result<u8, Exit> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(Exit::new(IO_ERROR, format!("writing to stdout: {e}"))),
    }
}

/// Writes `bytes` to the file `path`, replacing it.
pub(crate) fn to_file(path: &Path, bytes: &[u8]) -> Result<(), Exit> {
    std::fs::write(path, bytes)
        .map_err(|e| Exit::new(IO_ERROR, format!("writing {}: {e}", path.display())))
}
