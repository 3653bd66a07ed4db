//! One module per SQS action: typed input, validation, engine call, typed output.

pub(crate) mod change_message_visibility;
pub(crate) mod change_message_visibility_batch;
pub(crate) mod create_queue;
pub(crate) mod delete_message;
pub(crate) mod delete_message_batch;
pub(crate) mod delete_queue;
pub(crate) mod get_queue_attributes;
pub(crate) mod get_queue_url;
pub(crate) mod list_dead_letter_source_queues;
pub(crate) mod list_queues;
pub(crate) mod message_move_tasks;
pub(crate) mod permissions;
pub(crate) mod purge_queue;
pub(crate) mod receive_message;
pub(crate) mod send_message;
pub(crate) mod send_message_batch;
pub(crate) mod set_queue_attributes;
pub(crate) mod tags;
