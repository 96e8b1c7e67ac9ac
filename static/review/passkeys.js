/* Passkeys (DESIGN.md section 6.9): the browser half of the WebAuthn ceremonies.
   - Register: POST for creation options, navigator.credentials.create, POST the credential.
   - Sign a decision: POST the decision form (decision + binding) for request options whose
     challenge is the decision's digest, navigator.credentials.get, POST the assertion; the
     server answers where to go (the case page, the outcome in a message).
   Served as a file: the CSP allows no inline script. The CSRF token comes from the form. */
(function () {
  "use strict";

  function csrf(form) {
    var input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function showError(text) {
    var box = document.getElementById("passkey-error");
    if (box) { box.textContent = text; box.hidden = false; }
  }

  function postForm(url, form) {
    return fetch(url, {
      method: "POST", body: new FormData(form), credentials: "same-origin",
      headers: { "X-CSRFToken": csrf(form) }
    }).then(function (response) {
      return response.json().then(function (body) {
        if (!response.ok) { throw new Error(body.error || "the server refused"); }
        return body;
      });
    });
  }

  function postJSON(url, form, body) {
    return fetch(url, {
      method: "POST", body: JSON.stringify(body), credentials: "same-origin",
      headers: { "X-CSRFToken": csrf(form), "Content-Type": "application/json" }
    });
  }

  function register(form, button) {
    button.disabled = true;
    postForm(form.getAttribute("data-options-url"), form).then(function (options) {
      var publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options);
      return navigator.credentials.create({ publicKey: publicKey });
    }).then(function (credential) {
      var name = form.querySelector("input[name=name]");
      return postJSON(form.getAttribute("data-register-url"), form,
                      { credential: credential.toJSON(), name: name ? name.value : "" });
    }).then(function (response) {
      return response.json().then(function (body) {
        if (!response.ok) { throw new Error(body.error || "the server refused"); }
        window.location.assign(body.redirect);
      });
    }).catch(function (error) {
      showError("The passkey was not registered: " + error.message);
      button.disabled = false;
    });
  }

  function signDecision(button) {
    var form = button.closest("form");
    if (!form.querySelector("input[name=decision]:checked")) {
      showError("Choose replan or abort first.");
      return;
    }
    button.disabled = true;
    postForm(button.getAttribute("data-options-url"), form).then(function (options) {
      var publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options);
      return navigator.credentials.get({ publicKey: publicKey });
    }).then(function (credential) {
      return postJSON(button.getAttribute("data-sign-url"), form, { credential: credential.toJSON() });
    }).then(function (response) {
      return response.json().then(function (body) {
        if (!body.redirect) { throw new Error(body.error || "the server refused"); }
        window.location.assign(body.redirect);
      });
    }).catch(function (error) {
      showError("Nothing was signed: " + error.message);
      button.disabled = false;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var registerForm = document.getElementById("passkey-register-form");
    if (registerForm) {
      registerForm.addEventListener("submit", function (evt) {
        evt.preventDefault();
        register(registerForm, document.getElementById("passkey-register"));
      });
    }
    var signButton = document.getElementById("passkey-sign");
    if (signButton) {
      signButton.addEventListener("click", function () { signDecision(signButton); });
    }
  });
})();
