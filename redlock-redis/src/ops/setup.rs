//! Plain commands the backend never sends: the differential tests send
//! them (through [`command_words`](super::command_words)) to put a node's
//! key space in a state, as another client of the node could. Each is its
//! namesake in the node model ([`Command::Set`], [`Command::ZAdd`],
//! [`Command::Del`]).

use redlock_core::model::Command;

use super::script::Resp;

/// Appends `command` (a [`Command::Set`], [`Command::ZAdd`] or
/// [`Command::Del`]; any other is not written).
pub(super) fn write(packed: &mut Vec<u8>, command: &Command<'_>) {
    match *command {
        Command::Set { key, value, px } => {
            let mut resp = Resp(packed);
            resp.command(if px.is_some() { 5 } else { 3 })
                .bulk(b"SET")
                .bulk(key)
                .bulk(value);
            if let Some(px) = px {
                resp.bulk(b"PX").int(px);
            }
        }
        Command::ZAdd { key, score, member } => {
            let score = score.to_string();
            Resp(packed)
                .command(4)
                .bulk(b"ZADD")
                .bulk(key)
                .bulk(score.as_bytes())
                .bulk(member);
        }
        Command::Del { key } => {
            Resp(packed).command(2).bulk(b"DEL").bulk(key);
        }
        _ => {}
    }
}
