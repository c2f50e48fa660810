//! The one error type the UI's server functions return. Each variant is one
//! thing that can go wrong for a person, maps to one HTTP status, and its
//! Display text is what the page shows.

use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AppError {
    #[error("Please sign in first.")]
    NotSignedIn,
    #[error("You are not allowed to do that.")]
    Forbidden,
    #[error("Not found.")]
    NotFound,
    /// Refused for a reason the person should read (a disabled listing).
    #[error("{0}")]
    Refused(String),
    /// Input that does not parse; the text says which field and why.
    #[error("{0}")]
    Invalid(String),
    /// Arguments the function cannot even be called with (a field missing or of
    /// the wrong type): a request the UI never sends.
    #[error("Bad request: {0}")]
    BadRequest(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    BadCredentials(String),
    #[error("{0}")]
    TooManyAttempts(String),
    /// Too much work queued; worth retrying shortly.
    #[error("{0}")]
    Busy(String),
    #[error("Something went wrong on our side. Please try again.")]
    Internal,
    /// The request never reached the function (network, decoding).
    #[error("Could not reach the server: {0}")]
    Transport(String),
}

impl AppError {
    pub fn status(&self) -> u16 {
        match self {
            AppError::NotSignedIn | AppError::BadCredentials(_) => 401,
            AppError::Forbidden | AppError::Refused(_) => 403,
            AppError::NotFound => 404,
            AppError::BadRequest(_) => 400,
            AppError::Invalid(_) => 422,
            AppError::Conflict(_) => 409,
            AppError::TooManyAttempts(_) => 429,
            AppError::Busy(_) => 503,
            AppError::Internal | AppError::Transport(_) => 500,
        }
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            // On the server these come from decoding the request's arguments:
            // the function never ran, and the caller sent something wrong.
            #[cfg(feature = "ssr")]
            ServerFnErrorErr::Args(why) | ServerFnErrorErr::Deserialization(why) | ServerFnErrorErr::MissingArg(why) => {
                crate::api::server::fail(AppError::BadRequest(why))
            }
            other => AppError::Transport(other.to_string()),
        }
    }
}

#[cfg(feature = "ssr")]
mod from_domain {
    use super::AppError;
    use toolshed_domain::admin::AdminError;
    use toolshed_domain::moderation::ModerationError;
    use toolshed_domain::playground::PlaygroundError;
    use toolshed_domain::sessions::SessionError;
    use toolshed_domain::tools::approvals::DecisionError;
    use toolshed_domain::tools::ToolError;
    use toolshed_domain::upstream::UpstreamError;
    use toolshed_domain::AccountError;

    impl From<ToolError> for AppError {
        fn from(e: ToolError) -> Self {
            match e {
                ToolError::Invalid(_)
                | ToolError::BadArguments(_)
                | ToolError::NoSuchVersion(_)
                | ToolError::UnknownTool(_)
                | ToolError::Breaking(_)
                | ToolError::TestsMissing
                | ToolError::TestsFailed(_)
                | ToolError::HiddenInstructions(_) => AppError::Invalid(e.to_string()),
                ToolError::NotFound => AppError::NotFound,
                ToolError::Forbidden => AppError::Forbidden,
                ToolError::NotAnAuthor => AppError::Refused(e.to_string()),
                ToolError::NameTaken(_) | ToolError::NotPublished | ToolError::Conflict(_) => AppError::Conflict(e.to_string()),
                ToolError::Busy => AppError::Busy(e.to_string()),
                ToolError::TooManyCalls => AppError::TooManyAttempts(e.to_string()),
                ToolError::Disabled | ToolError::Held(_) | ToolError::NotConnected(_) => AppError::Refused(e.to_string()),
                ToolError::Store(e) => {
                    tracing::error!(error = %e, "store failure");
                    AppError::Internal
                }
            }
        }
    }

    impl From<DecisionError> for AppError {
        fn from(e: DecisionError) -> Self {
            match e {
                DecisionError::NotFound => AppError::NotFound,
                DecisionError::OwnRequest => AppError::Refused(e.to_string()),
                DecisionError::NotPending => AppError::Conflict(e.to_string()),
                DecisionError::NoteTooLong => AppError::Invalid(e.to_string()),
                DecisionError::Store(e) => {
                    tracing::error!(error = %e, "store failure");
                    AppError::Internal
                }
            }
        }
    }

    impl From<AccountError> for AppError {
        fn from(e: AccountError) -> Self {
            match e {
                AccountError::Invalid(_) => AppError::Invalid(e.to_string()),
                AccountError::UsernameTaken(_) => AppError::Conflict(e.to_string()),
                AccountError::InvalidCredentials | AccountError::WrongCurrentPassword => AppError::BadCredentials(e.to_string()),
                AccountError::RateLimited => AppError::TooManyAttempts(e.to_string()),
                AccountError::UnknownUser => AppError::NotSignedIn,
                AccountError::Forbidden => AppError::Forbidden,
                AccountError::NotMaintainer
                | AccountError::RegistrationClosed
                | AccountError::AwaitingApproval(_)
                | AccountError::Deactivated
                | AccountError::NoMappedGroup(_)
                | AccountError::PasswordsOff => AppError::Refused(e.to_string()),
                AccountError::InvalidInvite | AccountError::UnknownDepartment(_) => AppError::Invalid(e.to_string()),
                AccountError::Store(e) => {
                    tracing::error!(error = %e, "store failure");
                    AppError::Internal
                }
            }
        }
    }

    impl From<ModerationError> for AppError {
        fn from(e: ModerationError) -> Self {
            match e {
                ModerationError::Invalid(_) => AppError::Invalid(e.to_string()),
                ModerationError::NotFound => AppError::NotFound,
                ModerationError::Forbidden => AppError::Forbidden,
                ModerationError::NothingToReview | ModerationError::NothingHeld => AppError::Conflict(e.to_string()),
                ModerationError::Store(e) => {
                    tracing::error!(error = %e, "store failure");
                    AppError::Internal
                }
            }
        }
    }

    impl From<AdminError> for AppError {
        fn from(e: AdminError) -> Self {
            match e {
                AdminError::Invalid(_) | AdminError::UnknownUser(_) | AdminError::UnknownDepartment(_) | AdminError::NotAMember(..) => {
                    AppError::Invalid(e.to_string())
                }
                AdminError::Forbidden => AppError::Forbidden,
                AdminError::DepartmentTaken(_) | AdminError::LastAdmin | AdminError::DeactivateSelf | AdminError::AwaitingApproval(_) => {
                    AppError::Conflict(e.to_string())
                }
                AdminError::Store(e) => {
                    tracing::error!(error = %e, "store failure");
                    AppError::Internal
                }
            }
        }
    }

    impl From<PlaygroundError> for AppError {
        fn from(e: PlaygroundError) -> Self {
            match e {
                PlaygroundError::Invalid(_) => AppError::Invalid(e.to_string()),
                PlaygroundError::Forbidden => AppError::Forbidden,
                PlaygroundError::UnknownEndpoint | PlaygroundError::NotFound => AppError::NotFound,
                PlaygroundError::NameTaken(_) => AppError::Conflict(e.to_string()),
                PlaygroundError::Disabled => AppError::Refused(e.to_string()),
                PlaygroundError::Unreadable(_) => AppError::Refused(e.to_string()),
                PlaygroundError::Store(e) => {
                    tracing::error!(error = %e, "store failure");
                    AppError::Internal
                }
            }
        }
    }

    impl From<UpstreamError> for AppError {
        fn from(e: UpstreamError) -> Self {
            match e {
                UpstreamError::Invalid(_) => AppError::Invalid(e.to_string()),
                UpstreamError::Forbidden => AppError::Forbidden,
                UpstreamError::NotFound => AppError::NotFound,
                UpstreamError::NameTaken(_) | UpstreamError::DefinitionChanged => AppError::Conflict(e.to_string()),
                UpstreamError::ApprovalNeedsAdmin => AppError::Refused(e.to_string()),
                UpstreamError::Secret(_) | UpstreamError::Store(_) => {
                    tracing::error!(error = %e, "external server failure");
                    AppError::Internal
                }
            }
        }
    }

    impl From<toolshed_domain::connections::ConnectionError> for AppError {
        fn from(e: toolshed_domain::connections::ConnectionError) -> Self {
            use toolshed_domain::connections::ConnectionError as E;
            match e {
                E::Invalid(_) => AppError::Invalid(e.to_string()),
                E::Forbidden => AppError::Forbidden,
                E::NoSuchApp(_) | E::NoSuchDepartment(_) => AppError::Invalid(e.to_string()),
                E::NameTaken(_) | E::ChangedMeanwhile => AppError::Conflict(e.to_string()),
                E::FlowLost | E::Declined(_) | E::Unreachable(_) => AppError::Refused(e.to_string()),
                E::Secret(_) | E::Store(_) => {
                    tracing::error!(error = %e, "connected accounts failure");
                    AppError::Internal
                }
            }
        }
    }

    impl From<toolshed_domain::StoreError> for AppError {
        fn from(e: toolshed_domain::StoreError) -> Self {
            tracing::error!(error = %e, "store failure");
            AppError::Internal
        }
    }

    impl From<SessionError> for AppError {
        fn from(e: SessionError) -> Self {
            match e {
                SessionError::Account(e) => e.into(),
                SessionError::Session(e) => {
                    tracing::error!(error = %e, "session failure");
                    AppError::Internal
                }
            }
        }
    }
}
