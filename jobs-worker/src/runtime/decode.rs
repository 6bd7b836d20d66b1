//! Decoding a reserved payload: the job it names, or why it cannot run at all.

use redjob::job::registry::{self, JobRegistration};
use redjob::payload::laravel::{rounded_numbers, CALL_QUEUED_HANDLER};
use redjob::payload::php;
use redjob::payload::RawFields;
use redjob::{Payload, QueueConfig};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::reserved::Reserved;

/// A payload that decoded, with the job type that runs it.
pub(crate) struct Decoded {
    pub(crate) payload: Payload,
    pub(crate) registration: &'static JobRegistration,
    /// For a Laravel job class's payload, the object's properties as JSON.
    pub(crate) command: Option<Box<RawValue>>,
}

impl Decoded {
    /// The JSON the job type is filled from.
    pub(crate) fn data(&self) -> &RawValue {
        self.command.as_deref().unwrap_or(&self.payload.data)
    }
}

/// Why a reserved payload cannot run at all.
pub(crate) struct Undecodable {
    /// The payload's uuid, or a new one when it has none.
    pub(crate) uuid: String,
    /// The payload's job name, or `?`.
    pub(crate) job: String,
    /// Why it cannot run, as the failed-job record says.
    pub(crate) reason: String,
    /// For a job of a type this worker does not link, which a worker that does may run: when
    /// a worker first met it (`unrunnableSince`, 0: none before this one).
    pub(crate) unknown_since: Option<u32>,
}

impl Undecodable {
    /// A payload whose uuid and job are unknown: its failed-job record gets a new uuid.
    fn new(reason: impl Into<String>) -> Self {
        Undecodable {
            uuid: uuid::Uuid::new_v4().to_string(),
            job: "?".to_owned(),
            reason: reason.into(),
            unknown_since: None,
        }
    }
}

/// The payload and the job type that runs it, or why the job cannot run at all. A payload
/// over the size limit is failed without being parsed; with a signing key, a payload
/// without a valid signature is failed before its job type is looked up.
pub(crate) fn decode(job: &Reserved, config: &QueueConfig) -> Result<Decoded, Undecodable> {
    let size = job.unreadable.as_ref().map_or(job.raw.len(), Vec::len);
    if size > config.max_payload_bytes {
        return Err(Undecodable::new(format!(
            "payload too large: {size} bytes, over the limit of {} bytes; not decoded",
            config.max_payload_bytes
        )));
    }
    if job.unreadable.is_some() {
        return Err(Undecodable::new("malformed payload: not valid UTF-8"));
    }
    decode_payload(&job.raw, PayloadCopy::Reserved, config)
}

/// Which copy of a payload is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PayloadCopy {
    /// A reserved copy, whose `attempts` the pop script raised: still 0 means it could not.
    Reserved,
    /// The copy a failed-job record keeps: as it was before its last reservation.
    Stored,
}

/// A readable payload, checked against the signing key, with its job type.
pub(crate) fn decode_payload(
    raw: &str,
    copy: PayloadCopy,
    config: &QueueConfig,
) -> Result<Decoded, Undecodable> {
    let payload = Payload::from_json(raw).map_err(|err| {
        let fields = RawFields::parse(raw);
        let uuid = fields
            .text("uuid")
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let job = fields.text("job").unwrap_or_else(|| "?".to_owned());
        let reason = if fields.is_json() {
            format!("malformed payload: not a job payload ({err})")
        } else {
            format!("malformed payload: not valid JSON ({err})")
        };
        Undecodable {
            uuid,
            job,
            reason,
            unknown_since: None,
        }
    })?;
    if let Some(key) = &config.signing_key {
        key.verify(&payload).map_err(|mismatch| Undecodable {
            uuid: payload.uuid.to_string(),
            job: payload.job.clone(),
            reason: mismatch.to_string(),
            unknown_since: None,
        })?;
    }
    if copy == PayloadCopy::Reserved && payload.attempts == 0 {
        return Err(Undecodable {
            uuid: payload.uuid.to_string(),
            job: payload.job,
            reason: "malformed payload: its attempts could not be counted at reservation".into(),
            unknown_since: None,
        });
    }
    let rounded = rounded_numbers(payload.data.get());
    if !rounded.is_empty() {
        return Err(Undecodable {
            uuid: payload.uuid.to_string(),
            job: payload.job.clone(),
            reason: format!(
                "malformed payload: its data holds {} rounded to 14 significant digits, as a \
                 Laravel worker re-encodes a payload it reserves (Lua's cjson); integers over \
                 10^14 lose precision there: dispatch them as strings",
                rounded.join(", ")
            ),
            unknown_since: None,
        });
    }
    if payload.job == CALL_QUEUED_HANDLER {
        return laravel_command(payload, config);
    }
    match registry::find(&payload.job) {
        Some(registration) => Ok(Decoded {
            payload,
            registration,
            command: None,
        }),
        None => Err(Undecodable {
            uuid: payload.uuid.to_string(),
            job: payload.job.clone(),
            reason: format!(
                "unknown job type {:?}: no #[job] with that name is linked into this worker",
                payload.job
            ),
            unknown_since: Some(payload.unrunnable_since),
        }),
    }
}

/// A Laravel job class's payload: the Rust job declared for `data.commandName`
/// (`#[job(laravel = "...")]`), to be filled from the properties of `data.command`.
fn laravel_command(payload: Payload, config: &QueueConfig) -> Result<Decoded, Undecodable> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Command {
        command_name: String,
        command: String,
    }
    let fail = |payload: &Payload, reason: String| Undecodable {
        uuid: payload.uuid.to_string(),
        job: payload.display_name.clone(),
        reason,
        unknown_since: None,
    };
    let command: Command = match serde_json::from_str(payload.data.get()) {
        Ok(command) => command,
        Err(err) => {
            let reason =
                format!("malformed payload: a job class's data without its command ({err})");
            return Err(fail(&payload, reason));
        }
    };
    let Some(registration) = registry::find_laravel(&command.command_name) else {
        let reason = format!(
            "unknown job class {:?}: no #[job(laravel = ...)] for it is linked into this worker",
            command.command_name
        );
        // A worker that links it may run it.
        return Err(Undecodable {
            unknown_since: Some(payload.unrunnable_since),
            ..fail(&payload, reason)
        });
    };
    let object = if command.command.starts_with("O:") {
        command.command
    } else {
        // ShouldBeEncrypted: Laravel encrypted the object with the app's key.
        let Some(key) = config.laravel_key.as_ref() else {
            let reason = format!(
                "the command of job class {} is encrypted (ShouldBeEncrypted): set the Laravel \
                 app's key (APP_KEY) to read it",
                command.command_name
            );
            return Err(fail(&payload, reason));
        };
        match key.decrypt_command(&command.command) {
            Ok(object) => object,
            Err(err) => {
                let reason = format!(
                    "cannot decrypt the command of job class {}: {err}",
                    command.command_name
                );
                return Err(fail(&payload, reason));
            }
        }
    };
    let properties = match php::unserialize_object(object.as_bytes()) {
        Ok((_, properties)) => properties,
        Err(err) => {
            let reason = format!(
                "malformed payload: the command of job class {}: {err}",
                command.command_name
            );
            return Err(fail(&payload, reason));
        }
    };
    let command = serde_json::value::to_raw_value(&properties).ok();
    Ok(Decoded {
        payload,
        registration,
        command,
    })
}
