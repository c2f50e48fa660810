// The code editor: CodeMirror 6 over a plain <textarea data-code-editor>.
//
// The textarea stays the source of truth that the Leptos page reads and writes:
// typing in CodeMirror copies the text into it and fires `input`; when the page
// replaces the text itself (loading a version) it bumps `data-revision`, and the
// error line it wants marked is in `data-error-line`. Mounting waits for the
// wasm to hydrate (body[data-hydrated]) so the DOM it walks is untouched.
import { EditorView, basicSetup } from 'codemirror';
import { javascript } from '@codemirror/lang-javascript';
import { StateEffect, StateField } from '@codemirror/state';
import { Decoration } from '@codemirror/view';
import { HighlightStyle, syntaxHighlighting } from '@codemirror/language';
import { tags as t } from '@lezer/highlight';

// CodeMirror's default colours, but each readable on the editor's background
// (WCAG AA, 4.5:1, on the active line too): its orange and red were not.
const readableColours = HighlightStyle.define([
  { tag: t.meta, color: '#404740' },
  { tag: t.link, textDecoration: 'underline' },
  { tag: t.heading, textDecoration: 'underline', fontWeight: 'bold' },
  { tag: t.emphasis, fontStyle: 'italic' },
  { tag: t.strong, fontWeight: 'bold' },
  { tag: t.strikethrough, textDecoration: 'line-through' },
  { tag: t.keyword, color: '#708' },
  { tag: [t.atom, t.bool, t.url, t.contentSeparator, t.labelName], color: '#219' },
  { tag: [t.literal, t.inserted], color: '#164' },
  { tag: [t.string, t.deleted], color: '#a11' },
  { tag: [t.regexp, t.escape, t.special(t.string)], color: '#a33a00' },
  { tag: t.definition(t.variableName), color: '#00f' },
  { tag: t.local(t.variableName), color: '#30a' },
  { tag: [t.typeName, t.namespace], color: '#066146' },
  { tag: t.className, color: '#167' },
  { tag: [t.special(t.variableName), t.macroName], color: '#256' },
  { tag: t.definition(t.propertyName), color: '#00c' },
  { tag: t.comment, color: '#8a3d00' },
  { tag: t.invalid, color: '#c00' },
]);

const setErrorLine = StateEffect.define();
const errorLineField = StateField.define({
  create: () => Decoration.none,
  update(deco, tr) {
    deco = deco.map(tr.changes);
    for (const e of tr.effects) {
      if (e.is(setErrorLine)) {
        const line = e.value;
        if (line && line >= 1 && line <= tr.state.doc.lines) {
          const from = tr.state.doc.line(line).from;
          deco = Decoration.set([Decoration.line({ class: 'cm-error-line' }).range(from)]);
        } else {
          deco = Decoration.none;
        }
      }
    }
    return deco;
  },
  provide: (f) => EditorView.decorations.from(f),
});

function mount(textarea) {
  if (textarea.dataset.mounted) return;
  textarea.dataset.mounted = 'true';
  const host = document.createElement('div');
  host.className = 'cm-host';
  textarea.insertAdjacentElement('afterend', host);
  textarea.classList.add('cm-hidden');

  let applying = false;
  const view = new EditorView({
    doc: textarea.value,
    parent: host,
    extensions: [
      basicSetup,
      syntaxHighlighting(readableColours),
      javascript(),
      errorLineField,
      // The editable element is what screen readers land on: it takes the textarea's name.
      EditorView.contentAttributes.of({ 'aria-label': textarea.getAttribute('aria-label') ?? 'Code' }),
      EditorView.updateListener.of((u) => {
        if (u.docChanged && !applying) {
          textarea.value = u.state.doc.toString();
          textarea.dispatchEvent(new Event('input', { bubbles: true }));
        }
      }),
    ],
  });

  const markError = () => {
    const line = parseInt(textarea.dataset.errorLine ?? '', 10);
    view.dispatch({ effects: setErrorLine.of(Number.isFinite(line) ? line : null) });
    if (Number.isFinite(line) && line >= 1 && line <= view.state.doc.lines) {
      view.dispatch({ effects: EditorView.scrollIntoView(view.state.doc.line(line).from, { y: 'center' }) });
    }
  };
  const reload = () => {
    if (view.state.doc.toString() === textarea.value) return;
    applying = true;
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: textarea.value } });
    applying = false;
  };
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.attributeName === 'data-revision') reload();
      if (r.attributeName === 'data-error-line') markError();
    }
  }).observe(textarea, { attributes: true, attributeFilter: ['data-revision', 'data-error-line'] });
  markError();
  window.toolshedEditors = window.toolshedEditors ?? new Map();
  window.toolshedEditors.set(textarea.id || 'code', view);
}

function mountAll() {
  if (document.body.dataset.hydrated !== 'true') return;
  document.querySelectorAll('textarea[data-code-editor]').forEach(mount);
}

// Pages come and go without reloads (client-side routing): watch for editors.
new MutationObserver(mountAll).observe(document.body, {
  childList: true, subtree: true, attributes: true, attributeFilter: ['data-hydrated'],
});
mountAll();
