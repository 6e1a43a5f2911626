// A search hit asks the chat view to show one of its messages: at once when that chat is already open (the
// address does not change, so no navigation happens), else when the chat view opens (store.pendingFocus).

const EVENT = "contextshift:show-message";

/** Ask the open chat `chatId` to scroll to message `messageId` and highlight it. */
export function showMessage(chatId, messageId) {
  window.dispatchEvent(new CustomEvent(EVENT, { detail: { chatId, messageId } }));
}

/** Call fn(messageId) when a hit in chat `chatId` is clicked while it is open; returns the unsubscribe. */
export function onShowMessage(chatId, fn) {
  const listener = (event) => {
    if (event.detail?.chatId === chatId) fn(event.detail.messageId);
  };
  window.addEventListener(EVENT, listener);
  return () => window.removeEventListener(EVENT, listener);
}
