//! One module per SQS action: typed input, validation, engine call, typed output.

pub mod change_message_visibility;
pub mod change_message_visibility_batch;
pub mod create_queue;
pub mod delete_message;
pub mod delete_message_batch;
pub mod delete_queue;
pub mod get_queue_attributes;
pub mod get_queue_url;
pub mod list_dead_letter_source_queues;
pub mod list_queues;
pub mod message_move_tasks;
pub mod permissions;
pub mod purge_queue;
pub mod receive_message;
pub mod send_message;
pub mod send_message_batch;
pub mod set_queue_attributes;
pub mod tags;
